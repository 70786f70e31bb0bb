// Work done by one op call: floating-point operations and bytes moved through memory.
// Virtual chips pace kernels with it (time = flops/peak + bytes/bandwidth); the planner and
// MFU figures use the same counts, so a model of the machine has one source of truth.
#pragma once

#include "core/dtype.h"
#include "core/op_args.h"

namespace h2 {

struct OpCost {
  double flops = 0;          // counted at the op's compute dtype (matmul: 2*M*N*K)
  double bytes = 0;          // every tensor read or written once
  DType dtype = DType::f32;  // the peak-FLOP/s entry this work runs at
};

#define H2_OP(name, Args, layout, summary) OpCost op_cost_##name(const Args& args);
#include "core/ops.def"
#undef H2_OP

}  // namespace h2
