// Column maxima of bf16 magnitudes (column_magnitudes.h).
//
// Shapes: a band of `rows` rows, row stride ld (elements), w columns, taken 256 at a time: eight
// 32-lane vectors of 16-bit maxima. Per row and vector: a masked load (lanes past w read as 0,
// which leaves a maximum alone), |x| as x & 0x7fff, and a maximum over the lanes that are not
// NaN (magnitude above 0x7f80), so NaN counts as 0 as in magnitude_bits.
#include "backends/cpu/kernels/column_magnitudes.h"

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

bool avx512bw_here() {  // once: the quantizer asks per strip
  static const bool here = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw);
  return here;
}

}  // namespace

void bf16_column_magnitudes(const bf16_t* x, int64_t ld, int64_t rows, int64_t w, uint16_t* most) {
  if (avx512bw_here()) return columns_avx512(&x->bits, ld, rows, w, most);
  quantize_detail::column_magnitudes(x, ld, 0, rows, w, most);
}

}  // namespace h2::cpu
