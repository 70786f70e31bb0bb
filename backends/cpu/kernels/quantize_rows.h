// The CPU quantizer's row primitives (backends/cpu/kernels/quantize.cpp): its geometry, panels of
// FP32 rows, NaN-ignoring amaxes on bit patterns (a transposed input's too), and where a block's
// scale is stored, one at a time or a batch of them.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/bf16_amaxes.h"
#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/element.h"
#include "backends/cpu/kernels/transpose.h"
#include "core/lowp/block_scale.h"
#include "core/lowp/block_scales.h"
#include "core/lowp/formats.h"
#include "core/lowp/quant_spec.h"

namespace h2::cpu::quantize_detail {

using lowp::BlockScale;
using lowp::ScaleRule;

constexpr int64_t kPanel = 32;
constexpr int64_t kStripCols = 256;     // the strip path: columns of a transposed input per task
constexpr int64_t kMaxStripRows = 256;  // and at most its rows (a block's, where the amax is taken)
constexpr int64_t kStripRowStep = 32;   // the height of a two-pass strip, a multiple of this

// One thread's statistics, on its own cache line: the codec's saturated count (its amax is not
// taken: the quantizer has the input's, below, and the codec would see pre-scaled rows) and the
// input's amax.
struct alignas(64) PartStats {
  lowp::EncodeStats codec{.track_amax = false};
  float amax = 0;
};

struct Geometry {
  int64_t R = 0, K = 0;    // quantized matrix
  int64_t br = 1, bc = 1;  // block extents
  int64_t GR = 0, GC = 0;  // scale grid
  int64_t ld = 0;          // row stride of a panel scratch: K padded off multiples of 4 KiB
};

// Rows of a panel: row i at rows + i * ld.
struct Panel {
  const float* rows;
  int64_t ld;
};

// |x| as bits that order like |x| as unsigned integers, NaN as 0 (so a max ignores it): an
// integer max reduction vectorises where a float one with NaN rules does not. (The NaN mask is
// arithmetic: GCC 12 does not vectorise a select feeding the max.) A bf16 value is handled on its
// 16-bit pattern, NaN above 0x7f80, without widening.
inline uint32_t magnitude_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  return bits & (0u - uint32_t(bits <= 0x7f800000u));
}
inline uint16_t magnitude_bits(bf16_t x) {
  const uint16_t bits = x.bits & 0x7fffu;
  return uint16_t(bits & uint16_t(0u - uint16_t(bits <= 0x7f80u)));
}
inline float from_magnitude_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
inline float from_magnitude_bits(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

// Largest |x| of n f32 or bf16 values, NaN ignored; exact (a bf16 value is an FP32 one).
template <class X>
inline float abs_max(const X* x, int64_t n) {
  decltype(magnitude_bits(X{})) m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, magnitude_bits(x[i]));
  return from_magnitude_bits(m);
}

// amax[c] = abs_max of segment c of a row of K f32 or bf16 values (segments of bc values, the
// last one possibly shorter). Blocks of 32 and 128 values (the MX formats', fp8_blockwise's) take
// a loop of compile-time length: GCC's vectorisation of a run-time length cost 0.12-0.135 ns per
// bf16 value there against 0.07 (32) and 0.062-0.071 against 0.044 (128) on a Zen 4 core; at 16
// (nvfp4) the run-time loop is the faster, 0.08 against 0.13, and bf16 rows take
// bf16_segment16_amaxes's reduction in registers where the CPU has AVX512BW.
template <class X>
inline void segment_amaxes(const X* row, int64_t K, int64_t bc, float* amax) {
  if constexpr (std::is_same_v<X, bf16_t>) {
    if (bc == 16) {
      bf16_segment16_amaxes(row, K / 16, amax);
      if (K % 16 != 0) amax[K / 16] = abs_max(row + K / 16 * 16, K % 16);
      return;
    }
  }
  auto fixed = [&]<int64_t kWidth>(std::integral_constant<int64_t, kWidth>) {
    const int64_t whole = K / kWidth;
    for (int64_t c = 0; c < whole; ++c) {
      decltype(magnitude_bits(X{})) m = 0;
      for (int64_t i = 0; i < kWidth; ++i) m = std::max(m, magnitude_bits(row[c * kWidth + i]));
      amax[c] = from_magnitude_bits(m);
    }
    if (whole * kWidth < K) amax[whole] = abs_max(row + whole * kWidth, K - whole * kWidth);
  };
  if (bc == 32) return fixed(std::integral_constant<int64_t, 32>{});
  if (bc == 128) return fixed(std::integral_constant<int64_t, 128>{});
  for (int64_t k0 = 0, c = 0; k0 < K; k0 += bc, ++c)
    amax[c] = abs_max(row + k0, std::min(bc, K - k0));
}

inline float as_float(float x) {
  return x;
}
inline float as_float(bf16_t x) {
  return bf16_to_f32(x.bits);
}

// Rows [r0, r0 + n) of the (R, K) matrix as FP32, n <= kPanel: in place for row-major f32, else
// gathered into `scratch` (kPanel * g.ld floats). The padded stride keeps the n rows a tile
// writes in distinct cache sets.
template <class T>
inline Panel read_panel(const T* in, const Geometry& g, bool transpose, int64_t r0, int64_t n,
                        float* scratch) {
  const int64_t K = g.K, ld = g.ld;
  if (!transpose) {
    if constexpr (std::is_same_v<T, float>) {
      return {in + r0 * K, K};
    } else {
      for (int64_t i = 0; i < n; ++i) to_floats(in + (r0 + i) * K, K, scratch + i * ld);
      return {scratch, ld};
    }
  }
  // in is (K, R): element (r, k) is in[k * R + r].
  transpose_to_f32(in + r0, g.R, K, n, scratch, ld);
  return {scratch, ld};
}

// The column maxima of |x| (as magnitude_bits) of rows [k0, k1) of an f32 or bf16 matrix with
// row stride ld, columns [0, w): most[i] for column i.
template <class X>
inline void column_magnitudes(const X* __restrict x, int64_t ld, int64_t k0, int64_t k1, int64_t w,
                              decltype(magnitude_bits(X{}))* __restrict most) {
  std::fill(most, most + w, 0);
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t i = 0; i < w; ++i) most[i] = std::max(most[i], magnitude_bits(x[k * ld + i]));
}

// Pass 1's row amaxes of a transposed input without gathering it: in is (K, R), so segment c of
// quantized row r is column r of in's rows [c bc, (c + 1) bc), and the column maxima of those
// rows give it for every r at once (f16 widened first). Stored at amax[r * GC + c], or
// column-laid at amax[c * R + r]. NaN is ignored, as in abs_max.
template <class T>
void transposed_segment_amax(const T* in, const Geometry& g, bool column_laid, float* amax) {
  const int64_t R = g.R, K = g.K, bc = g.bc, GC = g.GC;
  const int64_t r_stride = column_laid ? 1 : GC, c_stride = column_laid ? R : 1;
  parallel_for(GC, bc * R, [&](int64_t c0, int64_t c1) {
    float values[kStripCols];
    uint32_t wide[kStripCols];
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t r0 = 0; r0 < R; r0 += kStripCols) {
        const int64_t n = std::min(kStripCols, R - r0);
        const int64_t k0 = c * bc, k1 = std::min(K, (c + 1) * bc);
        float* out = amax + r0 * r_stride + c * c_stride;
        if constexpr (std::is_same_v<T, f16_t>) {
          std::fill(wide, wide + n, 0u);
          for (int64_t k = k0; k < k1; ++k) {
            to_floats(in + k * R + r0, n, values);
            for (int64_t i = 0; i < n; ++i) wide[i] = std::max(wide[i], magnitude_bits(values[i]));
          }
          for (int64_t i = 0; i < n; ++i) out[i * r_stride] = from_magnitude_bits(wide[i]);
        } else {
          decltype(magnitude_bits(T{})) most[kStripCols];
          if constexpr (std::is_same_v<T, bf16_t>) {
            bf16_column_magnitudes(in + k0 * R + r0, R, k1 - k0, n, most);
          } else {
            column_magnitudes(in + r0, R, k0, k1, n, most);
          }
          for (int64_t i = 0; i < n; ++i) out[i * r_stride] = from_magnitude_bits(most[i]);
        }
      }
  });
}

// Stores one block's scale in the scales tensor (f32, E8M0 byte or E4M3 byte).
inline void store_scale(void* scales, ScaleRule rule, int64_t index, const BlockScale& s) {
  if (rule == ScaleRule::f32_amax) {
    static_cast<float*>(scales)[index] = s.scale;
  } else {
    static_cast<uint8_t*>(scales)[index] = s.code;
  }
}

// The scales of n blocks under a fused rule (f32_amax, e8m0_floor, e8m0_ceil) from their amaxes,
// in one batch call (core/lowp/block_scales.h): multipliers m[b] (m may be amax itself), the
// scales stored in `scales` at block index first + b * stride, through a buffer where stride > 1
// (a strip's columns, one block each, lie GC blocks apart in the scales).
inline void fused_block_scales(ScaleRule rule, float max_finite, const float* amax, int64_t n,
                               float* m, void* scales, int64_t first, int64_t stride) {
  const bool f32 = rule == ScaleRule::f32_amax;
  auto batch = [&](const float* a, int64_t count, float* mult, void* out) {
    if (f32) {
      lowp::f32_amax_scales_n(a, count, max_finite, mult, static_cast<float*>(out));
    } else {
      lowp::e8m0_scales_n(a, count, rule == ScaleRule::e8m0_ceil, max_finite, mult,
                          static_cast<uint8_t*>(out));
    }
  };
  if (stride == 1)
    return batch(amax, n, m, static_cast<uint8_t*>(scales) + first * (f32 ? sizeof(float) : 1));
  float f32_scales[kStripCols];
  uint8_t codes[kStripCols];
  for (int64_t b0 = 0; b0 < n; b0 += kStripCols) {
    const int64_t count = std::min(kStripCols, n - b0);
    batch(amax + b0, count, m + b0, f32 ? static_cast<void*>(f32_scales) : codes);
    for (int64_t b = 0; b < count; ++b) {
      const int64_t index = first + (b0 + b) * stride;
      if (f32) {
        static_cast<float*>(scales)[index] = f32_scales[b];
      } else {
        static_cast<uint8_t*>(scales)[index] = codes[b];
      }
    }
  }
}

}  // namespace h2::cpu::quantize_detail
