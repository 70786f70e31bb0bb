// Entry points of the CUDA kernels, one per op in core/ops.def, each implemented in the .cu
// file of its op family. Each assumes what its args struct documents (core/op_args.h), validates
// shapes with H2_CUDA_REQUIRE, makes the stream's device current and launches on the stream
// (asynchronously: nothing here waits for the GPU). Storage is f32, bf16 or f16; arithmetic is
// FP32 (reductions in double where the op says so).
#pragma once

#include "core/device.h"
#include "core/op_args.h"

namespace h2::cuda {

// The attention kernels tile head dims up to this; the kernel table refuses longer heads, which
// dispatch then runs on the CPU.
inline constexpr int kMaxAttentionHeadDim = 256;

#define H2_OP(name, Args, layout, summary) void name(const Args& args, Stream& stream);
#include "core/ops.def"
#undef H2_OP

}  // namespace h2::cuda
