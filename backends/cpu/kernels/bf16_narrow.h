// f32 -> bf16 rounding (nearest, ties to even; NaN stays NaN, quiet) in vectors, for
// cpu_floats.h's from_floats, which every bf16 kernel's store and every widened GEMM's output
// pass through. Per value on a Zen 5 core, in L1: AVX-512 0.034 ns, AVX2 0.072 ns, the loop the
// compiler makes of f32_to_bf16 for AVX2 0.12 ns (0.07 for AVX-512 in L2). Widening is a shift
// that memory bounds at any width, so it has no such twin.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>

#include "core/half_float.h"

namespace h2::cpu {

// Each rounds the first values of src into dst, bit-identical to f32_to_bf16 per value, and
// returns how many it did; the caller does the rest.
// n / 16 * 16 of them, on a CPU with AVX512F and AVX512BW.
int64_t from_floats_avx512(const float* src, int64_t n, bf16_t* dst);
// n / 8 * 8 of them, on a CPU with AVX2.
int64_t from_floats_avx2(const float* src, int64_t n, bf16_t* dst);

#if defined(__x86_64__)
// The AVX-512 rounding of 16 values' bits, in place in their 32-bit lanes (the result in each
// lane's upper half; NaN lanes u | 0x00400000, the quiet bit, by a masked OR). The shift's
// zero-masked form, all lanes on: its unmasked form starts from an undefined vector and draws
// GCC 12's false "may be used uninitialized" warning.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline __m512i bf16_rounded_lanes(
    __m512i u) {
  const __m512i odd =
      _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
  const __mmask16 nan =
      _mm512_cmp_ps_mask(_mm512_castsi512_ps(u), _mm512_castsi512_ps(u), _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
}

// 32 values (lo: the first 16) rounded as f32_to_bf16 and stored at dst: from_floats_avx512's
// step, for kernels whose values are in registers. VPERMT2W gathers the upper 16-bit halves of
// the pair's 32 lanes, words 1, 3, ..., 63, in order into one store.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline void store_bf16x32_avx512(
    __m512 lo, __m512 hi, bf16_t* dst) {
  const __m512i odd_words =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  _mm512_storeu_si512(
      dst, _mm512_permutex2var_epi16(bf16_rounded_lanes(_mm512_castps_si512(lo)), odd_words,
                                     bf16_rounded_lanes(_mm512_castps_si512(hi))));
}

// The AVX2 rounding of 8 values' bits (round to nearest even: u + 0x7fff + ((u >> 16) & 1); NaN
// lanes u | 0x00400000, the quiet bit, picked by a blend), each lane's upper half shifted down (a
// 16-bit value in a 32-bit lane).
[[gnu::target("avx2"), gnu::always_inline]] inline __m256i bf16_rounded_halves(__m256i u) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
  const __m256 f = _mm256_castsi256_ps(u);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  const __m256i quieted = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quieted, nan), 16);
}

// 16 values (lo: the first 8) rounded as f32_to_bf16 and stored at dst: from_floats_avx2's step,
// for kernels whose values are in registers. VPACKUSDW packs within 128-bit lanes (lo's first
// four, hi's first four, lo's last four, hi's last four); VPERMQ puts the four 64-bit quarters
// back in order. Every value fits in 16 bits, so the unsigned saturation never clips.
[[gnu::target("avx2"), gnu::always_inline]] inline void store_bf16x16_avx2(__m256 lo, __m256 hi,
                                                                           bf16_t* dst) {
  const __m256i packed = _mm256_packus_epi32(bf16_rounded_halves(_mm256_castps_si256(lo)),
                                             bf16_rounded_halves(_mm256_castps_si256(hi)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permute4x64_epi64(packed, 0xd8));
}
#endif

}  // namespace h2::cpu
