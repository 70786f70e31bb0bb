// The row loops of wide_rows.h, each run in in_fastest_build (core/fastest_build.h): compiled for
// the kernels' -march and for x86-64-v4, the build picked once per process.
#include "backends/cpu/kernels/wide_rows.h"

#include "backends/cpu/kernels/cpu_math.h"
#include "core/fastest_build.h"

namespace h2::cpu {

void swiglu_fwd_row(const float* gate, const float* up, float* out, int64_t n) {
  in_fastest_build([=] {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + exp_f32(-g)) * up[i];
    }
  });
}

void swiglu_bwd_row(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n) {
  in_fastest_build([=] {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i], u = up[i], d = dout[i];  // all read before either output is written
      const float sig = 1.0f / (1.0f + exp_f32(-g));
      const float silu = g * sig;
      const float dsilu = sig * (1.0f + g * (1.0f - sig));
      dgate[i] = d * u * dsilu;
      dup[i] = d * silu;
    }
  });
}

float exp_shifted_sum(float* p, int64_t n, float shift) {
  float total = 0;
  float* result = &total;  // written once, after the loop
  in_fastest_build([=] {
    float sum = 0;
#pragma omp simd simdlen(16) reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      p[j] = exp_f32(p[j] - shift);
      sum += p[j];
    }
    *result = sum;
  });
  return total;
}

void exp_shifted(float* p, int64_t n, float shift) {
  in_fastest_build([=] {
#pragma omp simd simdlen(16)
    for (int64_t j = 0; j < n; ++j) p[j] = exp_f32(p[j] - shift);
  });
}

}  // namespace h2::cpu
