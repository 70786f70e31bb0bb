// Elementwise ops: add (residual add, gradient accumulation) and the SwiGLU gate with its
// gradient. Each tensor may be stored as f32, bf16 or f16 on its own; math is FP32. Work goes in
// chunks that are read completely before they are written, so outputs may alias inputs.
#include <algorithm>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/wide_rows.h"
#include "core/error.h"

namespace h2::cpu {

// a, b, out: (S...) -> out = alpha*a + beta*b; b optional (then out = alpha*a).
void add(const AddArgs& args, Stream&) {
  check_same_shape("add", args.a, "a", args.out, "out");
  const bool has_b = args.b.defined();
  if (has_b) check_same_shape("add", args.b, "b", args.out, "out");
  const FloatIn a(args.a, "add", "a");
  const FloatIn b = has_b ? FloatIn(args.b, "add", "b") : FloatIn();
  const FloatOut out(args.out, "add", "out");
  const float alpha = args.alpha, beta = args.beta;
  parallel_chunks_fastest(args.out.numel(), kChunk, 3, [=](int64_t begin, int64_t n) {
    float a_buf[kChunk], b_buf[kChunk], o_buf[kChunk];
    const float* x = a.read(begin, n, a_buf);
    float* o = out.target(begin, o_buf);
    if (has_b) {
      const float* y = b.read(begin, n, b_buf);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = alpha * x[i] + beta * y[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = alpha * x[i];
    }
    out.commit(begin, n, o);
  });
}

// gate, up: (N..., F) -> out: (N..., F) = silu(gate) * up.
void swiglu_fwd(const SwigluFwdArgs& args, Stream&) {
  check_same_shape("swiglu_fwd", args.up, "up", args.gate, "gate");
  check_same_shape("swiglu_fwd", args.out, "out", args.gate, "gate");
  const FloatIn gate(args.gate, "swiglu_fwd", "gate"), up(args.up, "swiglu_fwd", "up");
  const FloatOut out(args.out, "swiglu_fwd", "out");
  parallel_chunks(args.gate.numel(), kChunk, 8, [&](int64_t begin, int64_t n) {
    float g_buf[kChunk], u_buf[kChunk], o_buf[kChunk];
    const float* g = gate.read(begin, n, g_buf);
    const float* u = up.read(begin, n, u_buf);
    float* o = out.target(begin, o_buf);
    swiglu_fwd_row(g, u, o, n);
    out.commit(begin, n, o);
  });
}

// dout, gate, up: (N..., F) -> dgate = dout * up * silu'(gate), dup = dout * silu(gate).
void swiglu_bwd(const SwigluBwdArgs& args, Stream&) {
  const char* op = "swiglu_bwd";
  check_same_shape(op, args.up, "up", args.gate, "gate");
  check_same_shape(op, args.dout, "dout", args.gate, "gate");
  check_same_shape(op, args.dgate, "dgate", args.gate, "gate");
  check_same_shape(op, args.dup, "dup", args.gate, "gate");
  const FloatIn gate(args.gate, op, "gate"), up(args.up, op, "up"), dout(args.dout, op, "dout");
  const FloatOut dgate(args.dgate, op, "dgate"), dup(args.dup, op, "dup");
  parallel_chunks(args.gate.numel(), kChunk, 10, [&](int64_t begin, int64_t n) {
    float g_buf[kChunk], u_buf[kChunk], d_buf[kChunk], dg_buf[kChunk], du_buf[kChunk];
    const float* g = gate.read(begin, n, g_buf);
    const float* u = up.read(begin, n, u_buf);
    const float* d = dout.read(begin, n, d_buf);
    float* dg = dgate.target(begin, dg_buf);
    float* du = dup.target(begin, du_buf);
    swiglu_bwd_row(g, u, d, dg, du, n);
    dgate.commit(begin, n, dg);
    dup.commit(begin, n, du);
  });
}

}  // namespace h2::cpu
