// Maxima of bf16 magnitudes (bf16_amaxes.h). |x| is x & 0x7fff, and NaN (a magnitude above
// 0x7f80) counts as 0, as in magnitude_bits.
//
// Columns: a band of `rows` rows, row stride ld (elements), w columns, taken 256 at a time:
// eight 32-lane vectors of 16-bit maxima. Per row and vector: a masked load (lanes past w read as
// 0, which leaves a maximum alone), then a maximum over the lanes that are not NaN.
//
// Segments: 16 segments of 16 values (256 values, eight vectors of two segments each) reduce by
// halving: the even and the odd lanes of two vectors side by side (two permutes) are the
// pairwise maxima of the segments of both, in order, in one vector with half the lanes per
// segment. Three rounds take the eight vectors to one with two lanes per segment, a fourth
// leaves segment s in lane s: 24 operations for 256 values after the 24 that take magnitudes,
// where a reduction per segment takes about as many for 16.
#include "backends/cpu/kernels/bf16_amaxes.h"

#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/kernels/quantize_rows.h"
#include "core/cpu_features.h"

namespace h2::cpu {
namespace {

constexpr int kVectors = 8;  // of 32 columns: 256 columns per pass over the band

[[gnu::target("avx512f,avx512bw")]] void columns_avx512(const uint16_t* x, int64_t ld, int64_t rows,
                                                        int64_t w, uint16_t* most) {
  const __m512i abs_mask = _mm512_set1_epi16(0x7fff), inf = _mm512_set1_epi16(0x7f80);
  for (int64_t c0 = 0; c0 < w; c0 += 32 * kVectors) {
    __mmask32 lanes[kVectors];
    __m512i top[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      const int64_t left = std::clamp<int64_t>(w - c0 - 32 * v, 0, 32);
      lanes[v] = left == 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
      top[v] = _mm512_setzero_si512();
    }
    for (int64_t k = 0; k < rows; ++k) {
      const uint16_t* row = x + k * ld + c0;
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) {
        const __m512i m =
            _mm512_and_si512(_mm512_maskz_loadu_epi16(lanes[v], row + 32 * v), abs_mask);
        top[v] = _mm512_mask_max_epu16(top[v], _mm512_cmple_epu16_mask(m, inf), top[v], m);
      }
    }
    for (int v = 0; v < kVectors; ++v)
      _mm512_mask_storeu_epi16(most + c0 + 32 * v, lanes[v], top[v]);
  }
}

// The magnitudes of 32 bf16 values, NaN as 0.
[[gnu::target("avx512f,avx512bw"), gnu::always_inline]] inline __m512i magnitudes(__m512i v) {
  const __m512i m = _mm512_and_si512(v, _mm512_set1_epi16(0x7fff));
  return _mm512_maskz_mov_epi16(_mm512_cmple_epu16_mask(m, _mm512_set1_epi16(0x7f80)), m);
}

[[gnu::target("avx512f,avx512bw")]] void segments_avx512(const uint16_t* row, int64_t groups,
                                                         float* amax) {
  __m512i even, odd;
  {
    alignas(64) uint16_t index[32];
    for (int j = 0; j < 32; ++j) index[j] = uint16_t(2 * j);
    even = _mm512_load_si512(index);
    odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
  }
  for (int64_t g = 0; g < groups; ++g, row += 256, amax += 16) {
    __m512i v[8];
    for (int i = 0; i < 8; ++i) v[i] = magnitudes(_mm512_loadu_si512(row + 32 * i));
    for (int n = 8; n > 1; n /= 2)  // n vectors of 16 / n lanes per segment -> n / 2
      for (int i = 0; i < n / 2; ++i)
        v[i] = _mm512_max_epu16(_mm512_permutex2var_epi16(v[2 * i], even, v[2 * i + 1]),
                                _mm512_permutex2var_epi16(v[2 * i], odd, v[2 * i + 1]));
    const __m512i top =
        _mm512_max_epu16(_mm512_permutexvar_epi16(even, v[0]), _mm512_permutexvar_epi16(odd, v[0]));
    const __m256i low = _mm512_maskz_extracti64x4_epi64(__mmask8(0xff), top, 0);
    _mm512_storeu_si512(
        amax, _mm512_maskz_slli_epi32(__mmask16(0xffff),
                                      _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), low), 16));
  }
}

}  // namespace

void bf16_column_magnitudes(const bf16_t* x, int64_t ld, int64_t rows, int64_t w, uint16_t* most) {
  if (cpu_has_avx512bw()) return columns_avx512(&x->bits, ld, rows, w, most);
  quantize_detail::column_magnitudes(x, ld, 0, rows, w, most);
}

void bf16_segment16_amaxes(const bf16_t* row, int64_t segments, float* amax) {
  int64_t done = 0;
  if (cpu_has_avx512bw()) {
    segments_avx512(&row->bits, segments / 16, amax);
    done = segments / 16 * 16;
  }
  for (int64_t c = done; c < segments; ++c) amax[c] = quantize_detail::abs_max(row + 16 * c, 16);
}

}  // namespace h2::cpu
