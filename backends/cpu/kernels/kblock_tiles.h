// The pieces of fp8_blockwise's K-block GEMM (kblock_gemm.h) that its two tile loops share: the
// problem's geometry, where a tile's sums go, and their promotion with the K blocks' scales (by
// AVX-512 registers, kblock_gemm.cpp; or by AMX's tile unit, kblock_amx.cpp). Internal to them.
//
// Shapes: see kblock_gemm.cpp. A tile of out is kNR = 32 columns wide: two 16-float halves.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace h2::cpu::kblock {

#define H2_AVX512_BF16 [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")]]
constexpr int64_t kNR = 32;  // columns of an out tile: two 16-float vectors
// Every lane: the zero-masked forms of the intrinsics, whose unmasked forms start from
// _mm512_undefined_epi32 and draw GCC 12's false "may be used uninitialized" warnings.
constexpr __mmask16 kAll = 0xffff;

struct Geometry {
  int64_t M, N, K, Kp, kb, J, P;
  int64_t Ks;  // K extent of a packed panel and of a decoded row of a: Kp, or (AMX) Kp rounded
               // up to 32, zeros past Kp
};

// Where a tile's rows go: out's f32 or bf16 row-major (M, N) storage at row i0, column n0, w
// columns of the tile's kNR valid; out's own values times beta are where the sums start (not
// read where beta is 0).
struct TileOut {
  float* f32;
  uint16_t* bf16;  // bits; rounded to nearest even as f32_to_bf16 does
  int64_t ld, w;
  float beta;
};

// The out tiles of one tile of a's rows (i0, rows), panel by panel; where beta is not 0 each
// prefetches the rows of out that the next tile starts from (the next panel's, or after the last
// panel the thread's next rows', next_rows of them): read cold by a tile's first promotion, they
// were half of the time outside the tiles.
struct PanelOuts {
  const Geometry& g;
  float* f32;      // out at row i0, column 0, where it is f32
  uint16_t* bf16;  // or bf16
  float beta;
  int64_t rows, next_rows;

  TileOut operator()(int64_t p) const {
    const int64_t n0 = p * kNR;
    if (beta != 0) {
      if (p + 1 < g.P) {
        prefetch(rows, n0 + kNR);
      } else {
        prefetch(next_rows, rows * g.N);
      }
    }
    return {.f32 = f32 != nullptr ? f32 + n0 : nullptr,
            .bf16 = bf16 != nullptr ? bf16 + n0 : nullptr,
            .ld = g.N,
            .w = std::min(kNR, g.N - n0),
            .beta = beta};
  }
  // Prefetches n rows of kNR columns of out from element `at` past this tile's start.
  void prefetch(int64_t n, int64_t at) const {
    const size_t bytes = f32 != nullptr ? sizeof(float) : sizeof(uint16_t);
    const char* base =
        f32 != nullptr ? reinterpret_cast<const char*>(f32) : reinterpret_cast<const char*>(bf16);
    for (int64_t r = 0; r < n; ++r)
      for (size_t b = 0; b < size_t(kNR) * bytes; b += 64)
        __builtin_prefetch(base + size_t(at + r * g.N) * bytes + b);
  }
};

// beta times 16 values of out's row r from column `half` * 16 on (those of `mask`; 0 elsewhere),
// as FP32: what the first K block's promotion adds to.
H2_AVX512_BF16 inline __m512 scaled_out(const TileOut& out, int r, int half, __mmask16 mask) {
  const int64_t at = r * out.ld + half * 16;
  const __m512 x =
      out.f32 != nullptr
          ? _mm512_maskz_loadu_ps(mask, out.f32 + at)
          : _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
                kAll,
                _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(mask, out.bf16 + at)),
                16));
  return _mm512_mul_ps(_mm512_set1_ps(out.beta), x);
}

// Stores 16 floats (those of `mask`) as bf16 bits: round to nearest even, NaN made quiet, as
// f32_to_bf16. (Not FloatOut::commit, f32_to_bf16's loop: writing the tiles through it made the
// forward qmatmul of the gate projection, bf16 out, 4.5% slower: 0.945 -> 0.990 ms.)
H2_AVX512_BF16 inline void store_bf16(uint16_t* dst, __m512 v, __mmask16 mask) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_maskz_srli_epi32(
      kAll, _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(0x0040));
  _mm256_mask_storeu_epi16(dst, mask, _mm512_maskz_cvtepi32_epi16(kAll, r));
}

// Stores 32 floats (lo, then hi; those of m0 and m1) as store_bf16 does, by AVX512_BF16's
// VCVTNE2PS2BF16: the same rounding and quiet NaN, but subnormal inputs taken as zero, so a pair
// with any subnormal lane goes through store_bf16. (One instruction for 32 values instead of
// about ten per 16: the forward and dgrad tiles end in this store.)
H2_AVX512_BF16 inline void store_bf16_pair(uint16_t* dst, __m512 lo, __m512 hi, __mmask16 m0,
                                           __mmask16 m1) {
  constexpr int kSubnormal = 0x20;  // VFPCLASSPS category
  if ((_mm512_fpclass_ps_mask(lo, kSubnormal) | _mm512_fpclass_ps_mask(hi, kSubnormal)) != 0) {
    store_bf16(dst, lo, m0);
    store_bf16(dst + 16, hi, m1);
    return;
  }
  const __mmask32 mask = __mmask32(m0) | (__mmask32(m1) << 16);
  _mm512_mask_storeu_epi16(dst, mask, __m512i(_mm512_cvtne2ps_pbh(hi, lo)));
}

// Promotion of a row's sums T of K blocks into its FP32 sums c: c + (s_a s_b) T block after block
// (t0: columns 0-15, t1: 16-31), the first block's c being 0 (the same FMA with a zero addend, so
// that a zero keeps its sign) or beta * out; after the last block c goes out. Here where c starts
// and where it goes; each path makes the blocks' FMAs between them (promote_row in registers,
// promote_rows from the AMX tiles' stores).
struct RowSums {
  __m512 c0, c1;
};
struct OutColumns {  // the tile's columns that are out's, per 16-column half
  __mmask16 m0, m1;
  explicit OutColumns(const TileOut& out)
      : m0(out.w >= 16 ? 0xffff : __mmask16((1u << out.w) - 1)),
        m1(out.w >= 32   ? 0xffff
           : out.w <= 16 ? 0
                         : __mmask16((1u << (out.w - 16)) - 1)) {}
};
H2_AVX512_BF16 inline RowSums promotion_start(int64_t j, int r, const float* c, const TileOut& out,
                                              OutColumns m) {
  if (j > 0) return {_mm512_loadu_ps(c + r * kNR), _mm512_loadu_ps(c + r * kNR + 16)};
  if (out.beta != 0) return {scaled_out(out, r, 0, m.m0), scaled_out(out, r, 1, m.m1)};
  return {_mm512_setzero_ps(), _mm512_setzero_ps()};
}
// last: whether the block just promoted is the last one.
H2_AVX512_BF16 inline void promotion_end(bool last, int r, const RowSums& s, float* c,
                                         const TileOut& out, OutColumns m) {
  if (!last) {
    _mm512_storeu_ps(c + r * kNR, s.c0);
    _mm512_storeu_ps(c + r * kNR + 16, s.c1);
  } else if (out.f32 != nullptr) {
    _mm512_mask_storeu_ps(out.f32 + r * out.ld, m.m0, s.c0);
    _mm512_mask_storeu_ps(out.f32 + r * out.ld + 16, m.m1, s.c1);
  } else {
    store_bf16_pair(out.bf16 + r * out.ld, s.c0, s.c1, m.m0, m.m1);
  }
}

// The AMX path (kblock_amx.cpp).
constexpr int64_t kAmxRows = 32;  // rows of an out tile on the AMX path: two tiles of a

// Whether AMX's tiles take K blocks kb wide: AMX-BF16 (H2_CPU_MAX_ISA leaving it), steps of 32.
bool amx_takes(int64_t kb);
// Asks Linux for the AMX tile data state, once per process: false where it refuses.
bool request_amx_state();
// A thread's tile configuration, loaded before its first amx_row_of_tiles and released after.
void load_amx_config();
void release_amx();
// The out tiles of one tile of a's rows (`rows` <= kAmxRows of them, decoded with row stride lda
// and padded with zeros to Ks; rows past `rows` are read, their sums dropped) across every panel
// of b (`packed`, Ks x kNR each); sa, sb: the scales (see kblock_gemm.cpp), sb uniform across
// each panel where b's blocks span whole panels; c: kAmxRows x kNR floats of scratch.
void amx_row_of_tiles(const Geometry& g, int rows, bool uniform, const uint16_t* a, int64_t lda,
                      const uint16_t* packed, const float* sa, const float* sb, float* c,
                      const PanelOuts& outs);

}  // namespace h2::cpu::kblock
