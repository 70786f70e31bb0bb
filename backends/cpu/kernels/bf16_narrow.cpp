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

// Every lane: the zero-masked forms of the shift and the narrowing, whose unmasked forms start
// from an undefined vector and draw GCC 12's false "may be used uninitialized" warnings.
constexpr __mmask16 kAll = 0xffff;

// 16 values rounded in place in their 32-bit lanes (the result in each lane's upper half).
[[gnu::target("avx512f,avx512bw")]] inline __m512i round_lanes(__m512i u) {
  const __m512i lsb = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), lsb);
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(half, odd));
  const __mmask16 nan =
      _mm512_cmp_ps_mask(_mm512_castsi512_ps(u), _mm512_castsi512_ps(u), _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, u, quiet);
}

}  // namespace

[[gnu::target("avx512f,avx512bw")]] int64_t from_floats_avx512(const float* src, int64_t n,
                                                               bf16_t* dst) {
  // The upper 16-bit halves of 32 lanes, two vectors' worth, in order: VPERMT2W picks words
  // 1, 3, ..., 63 of the pair.
  const __m512i odd_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i lo = round_lanes(_mm512_loadu_si512(src + i));
    const __m512i hi = round_lanes(_mm512_loadu_si512(src + i + 16));
    _mm512_storeu_si512(dst + i, _mm512_permutex2var_epi16(lo, odd_words, hi));
  }
  if (i + 16 <= n) {
    const __m512i rounded = round_lanes(_mm512_loadu_si512(src + i));
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
