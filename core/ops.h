// The op API: h2::ops::NAME(args, stream) for every op in core/ops.def, e.g.
//   ops::rms_norm_fwd({.out = y, .rstd = r, .x = x, .weight = w, .eps = 1e-5f});
// Runs on the device of the op's tensors (all must share one), on `stream` or that device's
// default stream. Unsupported (device, op, dtype) throws UnsupportedError unless the op is in
// H2_FALLBACK_OPS (then it runs on the CPU with copies and a warning); ops in H2_CHECK_OPS are
// shadow-run on the CPU and mismatches logged. copy and fill never fall back: they are the
// mechanism fallback itself uses.
#pragma once

#include "core/device.h"
#include "core/op_args.h"
#include "core/op_catalogue.h"

namespace h2::ops {

#define H2_OP(name, Args, layout, summary) void name(const Args& args, Stream* stream = nullptr);
#include "core/ops.def"
#undef H2_OP

}  // namespace h2::ops
