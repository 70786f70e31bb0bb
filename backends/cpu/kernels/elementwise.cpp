// Elementwise ops: add (residual add, gradient accumulation) and the SwiGLU gate with its
// gradient. Each tensor may be stored as f32, bf16 or f16 on its own; math is FP32. Work goes in
// chunks that are read completely before they are written, so outputs may alias inputs.
#include <algorithm>
#include <array>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_math.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/row_starts.h"
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
  parallel_chunks(args.out.numel(), kChunk, 3, [&](int64_t begin, int64_t n) {
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

// gate, up: (N..., F) -> out: (N..., F) = silu(gate) * up. Each with dense rows and any other
// strides (gate and up may be the halves of a fused gate/up projection's output).
void swiglu_fwd(const SwigluFwdArgs& args, Stream&) {
  const char* op = "swiglu_fwd";
  check_same_shape(op, args.up, "up", args.gate, "gate");
  check_same_shape(op, args.out, "out", args.gate, "gate");
  const FloatIn gate(args.gate, op, "gate"), up(args.up, op, "up");
  const FloatOut out(args.out, op, "out");
  const std::array<RowStarts, 3> rows{RowStarts(args.gate, op, "gate"),
                                      RowStarts(args.up, op, "up"), RowStarts(args.out, op, "out")};
  const int64_t F = args.gate.rank() == 0 ? 1 : args.gate.size(-1);
  for_each_row_chunk(rows, args.gate.numel(), F, 8, [&](const auto& at, int64_t n) {
    float g_buf[kChunk], u_buf[kChunk], o_buf[kChunk];
    const float* g = gate.read(at[0], n, g_buf);
    const float* u = up.read(at[1], n, u_buf);
    float* o = out.target(at[2], o_buf);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float gv = g[i];
      o[i] = gv / (1.0f + exp_f32(-gv)) * u[i];
    }
    out.commit(at[2], n, o);
  });
}

// dout, gate, up: (N..., F) -> dgate = dout * up * silu'(gate), dup = dout * silu(gate). Each
// with dense rows and any other strides.
void swiglu_bwd(const SwigluBwdArgs& args, Stream&) {
  const char* op = "swiglu_bwd";
  check_same_shape(op, args.up, "up", args.gate, "gate");
  check_same_shape(op, args.dout, "dout", args.gate, "gate");
  check_same_shape(op, args.dgate, "dgate", args.gate, "gate");
  check_same_shape(op, args.dup, "dup", args.gate, "gate");
  const FloatIn gate(args.gate, op, "gate"), up(args.up, op, "up"), dout(args.dout, op, "dout");
  const FloatOut dgate(args.dgate, op, "dgate"), dup(args.dup, op, "dup");
  const std::array<RowStarts, 5> rows{
      RowStarts(args.gate, op, "gate"), RowStarts(args.up, op, "up"),
      RowStarts(args.dout, op, "dout"), RowStarts(args.dgate, op, "dgate"),
      RowStarts(args.dup, op, "dup")};
  const int64_t F = args.gate.rank() == 0 ? 1 : args.gate.size(-1);
  for_each_row_chunk(rows, args.gate.numel(), F, 10, [&](const auto& at, int64_t n) {
    float g_buf[kChunk], u_buf[kChunk], d_buf[kChunk], dg_buf[kChunk], du_buf[kChunk];
    const float* g = gate.read(at[0], n, g_buf);
    const float* u = up.read(at[1], n, u_buf);
    const float* d = dout.read(at[2], n, d_buf);
    float* dg = dgate.target(at[3], dg_buf);
    float* du = dup.target(at[4], du_buf);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float gv = g[i], uv = u[i], dv = d[i];  // all read before either output is written
      float sig = 1.0f / (1.0f + exp_f32(-gv));
      float silu = gv * sig;
      float dsilu = sig * (1.0f + gv * (1.0f - sig));
      dg[i] = dv * uv * dsilu;
      du[i] = dv * silu;
    }
    dgate.commit(at[3], n, dg);
    dup.commit(at[4], n, du);
  });
}

}  // namespace h2::cpu
