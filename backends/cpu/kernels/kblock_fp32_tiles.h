// The FP32 K-block GEMM's register tiles (kblock_fp32.h's TileFn), written once for any vector
// width: a tile row is two vectors of Lanes::kWidth floats, so tiles are R x 2 kWidth. Included
// only by kblock_avx2.cpp and kblock_avx512.cpp, each inside its `#pragma GCC target` region and
// with a Lanes type of its own, so that the same body compiles to 256-bit or 512-bit
// instructions and every instantiation stays in its file.
//
// Lanes provides: V (a vector of kWidth floats); kWidth; zero(); load(const float*);
// load_bf16(const bf16_t*) (kWidth bf16 values widened, exact); set1(float); mul(V, V);
// fmadd(V a, V b, V c) (a b + c, one rounding); store(float*, V); store_bf16(V lo, V hi,
// bf16_t*) (2 kWidth values rounded as f32_to_bf16).
//
// Every code value is exact in FP32 and so is the product of two, so each K block's products are
// summed by FMAs in FP32, in K order, as the AVX512_BF16 kernel sums them, and promoted to the
// tile's FP32 accumulator, c += (alpha s_a(i) s_b(n)) * T(i, n), block after block. Each tile
// prefetches b's panel kPrefetchBytes ahead (on the AVX2 path one block's linears went from 1.21x
// to 1.15x their bf16 time with it: h2_bench_lowp_linear).
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/kernels/kblock_fp32.h"

namespace h2::cpu::kblock_fp32 {

inline constexpr int64_t kPrefetchBytes = 1024;  // how far ahead in b's panel a tile prefetches

// beta times kWidth values of out's row r from column `half` * kWidth on, as FP32.
template <class Lanes>
inline typename Lanes::V scaled_out(const TileOut& out, int r, int half) {
  const int64_t at = r * out.ld + half * Lanes::kWidth;
  return Lanes::mul(Lanes::set1(out.beta), out.f32 != nullptr ? Lanes::load(out.f32 + at)
                                                              : Lanes::load_bf16(out.bf16 + at));
}

// Row r's promotion of block j: c + (s_a s_b) T, the first block's c being beta * out or 0 (the
// same FMA with a zero addend, so that a zero keeps its sign); after the last block to out.
template <class Lanes>
inline void promote_row(const Geometry& g, int64_t j, int r, typename Lanes::V t0,
                        typename Lanes::V t1, const float* sa, const float* sb, float* c,
                        const TileOut& out) {
  using L = Lanes;
  constexpr int64_t kNR = 2 * L::kWidth;
  typename L::V c0, c1;
  if (j > 0) {
    c0 = L::load(c + r * kNR);
    c1 = L::load(c + r * kNR + L::kWidth);
  } else if (out.beta != 0) {
    c0 = scaled_out<L>(out, r, 0);
    c1 = scaled_out<L>(out, r, 1);
  } else {
    c0 = c1 = L::zero();
  }
  const typename L::V s = L::set1(sa[r * g.J + j]);
  const float* sbj = sb + j * g.P * kNR;
  c0 = L::fmadd(L::mul(s, L::load(sbj)), t0, c0);
  c1 = L::fmadd(L::mul(s, L::load(sbj + L::kWidth)), t1, c1);
  if (j < g.J - 1) {
    L::store(c + r * kNR, c0);
    L::store(c + r * kNR + L::kWidth, c1);
  } else if (out.f32 != nullptr) {
    L::store(out.f32 + r * out.ld, c0);
    L::store(out.f32 + r * out.ld + L::kWidth, c1);
  } else {
    L::store_bf16(c0, c1, out.bf16 + r * out.ld);
  }
}

// One out tile of R rows (kblock_fp32.h's TileFn).
template <class Lanes, int R>
void tile(const Geometry& g, const float* a, int64_t lda, const float* panel, const float* sa,
          const float* sb, float* c, const TileOut& out) {
  using L = Lanes;
  constexpr int64_t kNR = 2 * L::kWidth, kLines = kNR * 4 / 64;  // a panel row's cache lines
  constexpr int64_t kAhead = kPrefetchBytes / (kNR * 4);         // panel rows
  for (int64_t j = 0; j < g.J; ++j) {
    typename L::V acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = L::zero();
    const int64_t k0 = j * g.kb, width = std::min(g.kb, g.K - k0);
    const float* bj = panel + k0 * kNR;
    const float* aj = a + k0;
#pragma GCC unroll 2
    for (int64_t k = 0; k < width; ++k) {
      for (int64_t line = 0; line < kLines; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(bj + (k + kAhead) * kNR + line * 16),
                     _MM_HINT_T0);
      const typename L::V b0 = L::load(bj + k * kNR);
      const typename L::V b1 = L::load(bj + k * kNR + L::kWidth);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        const typename L::V av = L::set1(aj[r * lda + k]);
        acc[r][0] = L::fmadd(av, b0, acc[r][0]);
        acc[r][1] = L::fmadd(av, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) promote_row<L>(g, j, r, acc[r][0], acc[r][1], sa, sb, c, out);
  }
}

// tiles<Lanes, MR>()[R - 1]: the tile of R rows, R = 1 .. MR.
template <class Lanes, int MR>
constexpr std::array<TileFn, MR> tiles() {
  return []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<TileFn, MR>{&tile<Lanes, I + 1>...};
  }
  (std::make_integer_sequence<int, MR>{});
}

}  // namespace h2::cpu::kblock_fp32
