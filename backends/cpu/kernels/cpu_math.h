// Math helpers of the CPU kernels that the compiler can vectorise: a branch-free FP32 exp (glibc's
// expf stays scalar without -ffast-math) and dot products accumulated in double with several
// independent accumulators. Results depend only on the inputs, never on the thread count.
#pragma once

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <bit>
#include <cmath>
#include <cstdint>

namespace h2::cpu {

// e^x in FP32 within 2 ulp over the whole range: Cody-Waite reduction by ln 2, Cephes' degree-6
// polynomial, and scaling by 2^n in two steps so that results underflow gradually (subnormals,
// then 0) and overflow to infinity as expf does. NaN in, NaN out.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  float shifted = xc * kLog2e + kShift;
  float n = shifted - kShift;
  int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShift);
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * (r * r) + r + 1.0f;
  int32_t n1 = ni >> 1, n2 = ni - n1;  // both in [-75, 65]: 2^n1 and 2^n2 are normal floats
  y = y * std::bit_cast<float>((n1 + 127) << 23);
  return y * std::bit_cast<float>((n2 + 127) << 23);  // a NaN x stays NaN through r and y
}

// Sum of a[i] * b[i] in double: 16 accumulators (vector registers), combined in a fixed order.
inline double dot_f64(const float* a, const float* b, int64_t n) {
  double acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += double(a[i + j]) * double(b[i + j]);
  for (int j = 0; i < n; ++i, ++j) acc[j] += double(a[i]) * double(b[i]);
  for (int j = 1; j < 16; ++j) acc[0] += acc[j];
  return acc[0];
}

// Sum of x[i] in double, as dot_f64.
inline double sum_f64(const float* x, int64_t n) {
  double acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += double(x[i + j]);
  for (int j = 0; i < n; ++i, ++j) acc[j] += double(x[i]);
  for (int j = 1; j < 16; ++j) acc[0] += acc[j];
  return acc[0];
}

// Largest of x[0..n): -inf when empty; NaNs are skipped (callers see them through exp).
inline float max_f32(const float* x, int64_t n) {
  float m = -__builtin_inff();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// dst[i] = sqrt(src[i]) (NaN for negatives), eight lanes at a time: std::sqrt keeps a scalar
// errno path that stops GCC from vectorising any loop around it. dst may equal src.
inline void sqrt_f32(const float* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__AVX__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_sqrt_ps(_mm256_loadu_ps(src + i)));
#endif
  for (; i < n; ++i) dst[i] = std::sqrt(src[i]);
}

}  // namespace h2::cpu
