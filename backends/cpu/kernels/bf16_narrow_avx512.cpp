// f32 -> bf16 in 512-bit vectors (bf16_narrow_avx512.h): the integer rounding of
// core/half_float.h's f32_to_bf16, 16 lanes at a time. Per vector: u + 0x7fff + ((u >> 16) & 1)
// rounds to nearest even in the upper half (a carry into the exponent gives the next binade, or
// infinity, as it should); NaN lanes (|u| > 0x7f800000) take u | 0x00400000 instead, the quiet
// bit, so that their upper half is f32_to_bf16's; VPMOVDW then stores the 16 upper halves.
#include "backends/cpu/kernels/bf16_narrow_avx512.h"

#include <immintrin.h>

namespace h2::cpu {
namespace {

// Every lane: the zero-masked forms of the shift and the narrowing, whose unmasked forms start
// from an undefined vector and draw GCC 12's false "may be used uninitialized" warnings.
constexpr __mmask16 kAll = 0xffff;

}  // namespace

[[gnu::target("avx512f,avx512bw")]] int64_t from_floats_avx512(const float* src, int64_t n,
                                                               bf16_t* dst) {
  const __m512i lsb = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(src + i);
    const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), lsb);
    __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(half, odd));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, magnitude), inf);
    rounded = _mm512_mask_or_epi32(rounded, nan, u, quiet);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + i),
        _mm512_maskz_cvtepi32_epi16(kAll, _mm512_maskz_srli_epi32(kAll, rounded, 16)));
  }
  return i;
}

}  // namespace h2::cpu
