// Entry points of the CPU kernels: h2::cpu::NAME(args, stream) for every op in core/ops.def,
// implemented in the file of the op's family (copy_fill, elementwise, reduce, matmul, embedding,
// rms_norm, rope, attention_fwd, attention_bwd, cross_entropy, adamw). Each assumes what its
// args struct documents (core/op_args.h) and validates shapes with H2_CHECK. Storage is f32,
// bf16 or f16; arithmetic is FP32, reductions wider. Kernels run synchronously.
#pragma once

#include "core/device.h"
#include "core/op_args.h"

namespace h2::cpu {

#define H2_OP(name, Args, layout, summary) void name(const Args& args, Stream& stream);
#include "core/ops.def"
#undef H2_OP

}  // namespace h2::cpu
