// The row loops of wide_rows.h: one body each, inlined into a baseline entry point and an
// AVX-512 one, picked once per process.
#include "backends/cpu/kernels/wide_rows.h"

#include "backends/cpu/kernels/cpu_math.h"
#include "core/cpu_features.h"

namespace h2::cpu {
namespace {

[[gnu::always_inline]] inline void swiglu_fwd_body(const float* gate, const float* up, float* out,
                                                   int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_f32(-g)) * up[i];
  }
}

[[gnu::always_inline]] inline void swiglu_bwd_body(const float* gate, const float* up,
                                                   const float* dout, float* dgate, float* dup,
                                                   int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], u = up[i], d = dout[i];  // all read before either output is written
    const float sig = 1.0f / (1.0f + exp_f32(-g));
    const float silu = g * sig;
    const float dsilu = sig * (1.0f + g * (1.0f - sig));
    dgate[i] = d * u * dsilu;
    dup[i] = d * silu;
  }
}

[[gnu::always_inline]] inline float exp_shifted_sum_body(float* p, int64_t n, float shift) {
  float sum = 0;
#pragma omp simd simdlen(16) reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    p[j] = exp_f32(p[j] - shift);
    sum += p[j];
  }
  return sum;
}

[[gnu::always_inline]] inline void exp_shifted_body(float* p, int64_t n, float shift) {
#pragma omp simd simdlen(16)
  for (int64_t j = 0; j < n; ++j) p[j] = exp_f32(p[j] - shift);
}

#define H2_WIDE [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl"), gnu::noinline]]

H2_WIDE void swiglu_fwd_wide(const float* gate, const float* up, float* out, int64_t n) {
  swiglu_fwd_body(gate, up, out, n);
}
H2_WIDE void swiglu_bwd_wide(const float* gate, const float* up, const float* dout, float* dgate,
                             float* dup, int64_t n) {
  swiglu_bwd_body(gate, up, dout, dgate, dup, n);
}
H2_WIDE float exp_shifted_sum_wide(float* p, int64_t n, float shift) {
  return exp_shifted_sum_body(p, n, shift);
}
H2_WIDE void exp_shifted_wide(float* p, int64_t n, float shift) {
  exp_shifted_body(p, n, shift);
}

#undef H2_WIDE

}  // namespace

bool wide_rows_use_avx512() {
  static const bool wide = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw) &&
                           cpu_has(CpuFeature::avx512dq) && cpu_has(CpuFeature::avx512vl);
  return wide;
}

void swiglu_fwd_row(const float* gate, const float* up, float* out, int64_t n) {
  if (wide_rows_use_avx512()) return swiglu_fwd_wide(gate, up, out, n);
  swiglu_fwd_body(gate, up, out, n);
}

void swiglu_bwd_row(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n) {
  if (wide_rows_use_avx512()) return swiglu_bwd_wide(gate, up, dout, dgate, dup, n);
  swiglu_bwd_body(gate, up, dout, dgate, dup, n);
}

float exp_shifted_sum(float* p, int64_t n, float shift) {
  if (wide_rows_use_avx512()) return exp_shifted_sum_wide(p, n, shift);
  return exp_shifted_sum_body(p, n, shift);
}

void exp_shifted(float* p, int64_t n, float shift) {
  if (wide_rows_use_avx512()) return exp_shifted_wide(p, n, shift);
  exp_shifted_body(p, n, shift);
}

}  // namespace h2::cpu
