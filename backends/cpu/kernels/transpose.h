// Transposing copies for the CPU kernels: dst (cols, rows) = src (rows, cols)^T.
//   transpose_to_f32: src in its storage type, dst FP32. Quantizing the transposed orientation of
//     an activation or gradient (x^T and dy^T of a weight gradient) reads its input this way.
//   transpose_bytes: one-byte elements (FP8 codes), bits unchanged; the copy op's path for a
//     transposed u8 view, which is how a linear layer takes W^T or dy^T as codes transposed.
//
// Shapes: src rows x cols with row stride src_ld (elements); dst cols x rows with row stride
// dst_ld (elements of dst's type).
//
// Algorithm: tiles transposed in registers, edges element by element. transpose_to_f32: 8 x 8
// tiles in AVX2 registers (eight 8-wide loads, three rounds of unpack/shuffle/permute, eight
// 8-wide stores) where the CPU kernels are built with AVX2 and the source is f32 or bf16
// (widening bf16 is exact: its bits shifted into the high half); f16 and builds without AVX2 copy
// element by element. transpose_bytes: 16 x 16 tiles in SSE2 registers (x86-64's baseline): four
// rounds of interleaving the bytes of row i with row i + 8, each a perfect shuffle of the 256
// bytes, and four perfect shuffles of a 16 x 16 matrix are its transpose; where the CPU has
// AVX512BW (run-time check), four such tiles stacked, one per 128-bit lane. Every element is a
// plain copy or an exact widening, so all paths give the same bits.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/element.h"
#include "core/cpu_features.h"

namespace h2::cpu {

#if defined(__AVX2__)
namespace transpose_detail {

inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline __m256 load8(const bf16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// dst[c * dst_ld + r] = src[r * src_ld + c] for r, c < 8.
template <class T>
inline void tile8x8(const T* src, int64_t src_ld, float* dst, int64_t dst_ld) {
  __m256 r0 = load8(src), r1 = load8(src + src_ld), r2 = load8(src + 2 * src_ld),
         r3 = load8(src + 3 * src_ld), r4 = load8(src + 4 * src_ld), r5 = load8(src + 5 * src_ld),
         r6 = load8(src + 6 * src_ld), r7 = load8(src + 7 * src_ld);
  // Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves exchanged.
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
  _mm256_storeu_ps(dst, r0);
  _mm256_storeu_ps(dst + dst_ld, r1);
  _mm256_storeu_ps(dst + 2 * dst_ld, r2);
  _mm256_storeu_ps(dst + 3 * dst_ld, r3);
  _mm256_storeu_ps(dst + 4 * dst_ld, r4);
  _mm256_storeu_ps(dst + 5 * dst_ld, r5);
  _mm256_storeu_ps(dst + 6 * dst_ld, r6);
  _mm256_storeu_ps(dst + 7 * dst_ld, r7);
}

}  // namespace transpose_detail
#endif

#if defined(__SSE2__)
namespace transpose_detail {

// dst[c * dst_ld + r] = src[r * src_ld + c] for r, c < 16.
inline void tile16x16(const uint8_t* src, int64_t src_ld, uint8_t* dst, int64_t dst_ld) {
  __m128i x[16], y[16];
  for (int i = 0; i < 16; ++i)
    x[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * src_ld));
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
      y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
  for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * dst_ld), x[i]);
}

// Four tile16x16 stacked (src rows 16t to 16t + 15 in 128-bit lane t), one in each lane of
// the same rounds in AVX-512 registers (the byte interleaves stay within lanes), so that each
// dst row's 64 bytes leave in one store: dst[c * dst_ld + r] = src[r * src_ld + c] for r < 64,
// c < 16. (Tiles side by side instead, 16 x 64, spread their stores over 64 dst rows at once and
// measured slower where dst_ld is a multiple of 1 KiB: those rows share four L1 sets.)
// Zero-masking forms, all lanes on: GCC 12 warns about the plain forms' undefined pass-through
// registers.
[[gnu::target("avx512f,avx512bw")]] inline void tile64x16(const uint8_t* src, int64_t src_ld,
                                                          uint8_t* dst, int64_t dst_ld) {
  constexpr __mmask64 kAll = ~__mmask64(0);
  __m512i x[16], y[16];
  for (int i = 0; i < 16; ++i) {
    auto row = [&](int t) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (16 * t + i) * src_ld));
    };
    const __m256i low = _mm256_inserti128_si256(_mm256_castsi128_si256(row(0)), row(1), 1);
    const __m256i high = _mm256_inserti128_si256(_mm256_castsi128_si256(row(2)), row(3), 1);
    x[i] = _mm512_maskz_inserti64x4(0xff, _mm512_castsi256_si512(low), high, 1);
  }
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = _mm512_maskz_unpacklo_epi8(kAll, x[i], x[i + 8]);
      y[2 * i + 1] = _mm512_maskz_unpackhi_epi8(kAll, x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * dst_ld, x[i]);
}

}  // namespace transpose_detail
#endif

// dst[c * dst_ld + r] = float(src[r * src_ld + c]) for r < rows, c < cols.
template <class T>
void transpose_to_f32(const T* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                      int64_t dst_ld) {
  int64_t r0 = 0;
#if defined(__AVX2__)
  if constexpr (!std::is_same_v<T, f16_t>) {
    for (; r0 + 8 <= rows; r0 += 8) {
      int64_t c0 = 0;
      for (; c0 + 8 <= cols; c0 += 8)
        transpose_detail::tile8x8(src + r0 * src_ld + c0, src_ld, dst + c0 * dst_ld + r0, dst_ld);
      for (int64_t r = r0; r < r0 + 8; ++r)
        for (int64_t c = c0; c < cols; ++c) dst[c * dst_ld + r] = load(src + r * src_ld + c);
    }
  }
#endif
  for (int64_t r = r0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_ld + r] = load(src + r * src_ld + c);
}

// dst[c * dst_ld + r] = src[r * src_ld + c] for r < rows and c in [c_begin, c_end): the dst rows
// [c_begin, c_end), so that threads given disjoint column ranges write disjoint rows.
inline void transpose_bytes(const uint8_t* src, int64_t src_ld, int64_t rows, int64_t c_begin,
                            int64_t c_end, uint8_t* dst, int64_t dst_ld) {
  int64_t r0 = 0;
#if defined(__SSE2__)
  // Bands of tile_rows rows of src: tiles of 16 columns, the band's last columns one by one.
  auto bands = [&](int64_t tile_rows, auto tile) {
    for (; r0 + tile_rows <= rows; r0 += tile_rows) {
      int64_t c0 = c_begin;
      for (; c0 + 16 <= c_end; c0 += 16)
        tile(src + r0 * src_ld + c0, src_ld, dst + c0 * dst_ld + r0, dst_ld);
      for (int64_t c = c0; c < c_end; ++c)
        for (int64_t r = r0; r < r0 + tile_rows; ++r) dst[c * dst_ld + r] = src[r * src_ld + c];
    }
  };
  if (cpu_has_avx512bw()) bands(64, transpose_detail::tile64x16);
  bands(16, transpose_detail::tile16x16);
#endif
  for (int64_t c = c_begin; c < c_end; ++c)
    for (int64_t r = r0; r < rows; ++r) dst[c * dst_ld + r] = src[r * src_ld + c];
}

}  // namespace h2::cpu
