// f32 -> bf16 in 512-bit and 256-bit vectors (bf16_narrow.h): the integer rounding of
// core/half_float.h's f32_to_bf16, 16 or 8 lanes at a time. Per vector: u + 0x7fff + ((u >> 16) &
// 1) rounds to nearest even in the upper half (a carry into the exponent gives the next binade, or
// infinity, as it should); NaN lanes (unordered with themselves) take u | 0x00400000 instead, the
// quiet bit, so that their upper half is f32_to_bf16's. VPERMT2W then gathers the upper halves of
// two vectors into one store: against a VPMOVDW per vector, a third fewer instructions, and tiny's
// bf16 step 1.4-1.8% shorter on the AVX-512 path (docs/performance.md). With AVX2, a blend
// picks the NaN lanes (0.072 ns per value, against 0.089 for and/andnot/or), and VPACKUSDW with
// a VPERMQ gathers two vectors' upper halves in order.
#include "backends/cpu/kernels/bf16_narrow.h"

#include <immintrin.h>

namespace h2::cpu {
namespace {

// Every lane: the zero-masked form of the narrowing, whose unmasked form starts from an undefined
// vector and draws GCC 12's false "may be used uninitialized" warning.
constexpr __mmask16 kAll = 0xffff;

}  // namespace

[[gnu::target("avx512f,avx512bw")]] int64_t from_floats_avx512(const float* src, int64_t n,
                                                               bf16_t* dst) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    store_bf16x32_avx512(_mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16), dst + i);
  if (i + 16 <= n) {
    const __m512i rounded = bf16_rounded_lanes(_mm512_loadu_si512(src + i));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + i),
        _mm512_maskz_cvtepi32_epi16(kAll, _mm512_maskz_srli_epi32(kAll, rounded, 16)));
    i += 16;
  }
  return i;
}

[[gnu::target("avx2")]] int64_t from_floats_avx2(const float* src, int64_t n, bf16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    store_bf16x16_avx2(_mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8), dst + i);
  if (i + 8 <= n) {
    const __m256i one =
        bf16_rounded_halves(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(one, one), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
    i += 8;
  }
  return i;
}

}  // namespace h2::cpu
