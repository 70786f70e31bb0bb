// The FP32 K-block GEMM (kblock_gemm.h's kblock_gemm_avx2 and kblock_gemm_avx512) split in two:
// its driver (kblock_fp32.cpp: b packed into panels, a's rows decoded per thread, tiles walked,
// edge panels buffered) and its register tiles (kblock_fp32_tiles.h), each written once; the
// tiles are compiled once per vector width (kblock_avx2.cpp: 6 x 16 in 256-bit registers;
// kblock_avx512.cpp: 12 x 32 in 512-bit ones), and this header is what the two halves share.
//
// Shapes: M rows of a and out; N rows of b (columns of out); K the reduction extent, in J blocks
// of kb columns (the last one possibly narrower). Tiles of out are at most mr x nr; P =
// ceil(N / nr) panels of b, each K x nr FP32 values (zeros past N).
#pragma once

#include <cstdint>
#include <span>

#include "backends/cpu/kernels/kblock_gemm.h"
#include "core/half_float.h"

namespace h2::cpu::kblock_fp32 {

struct Geometry {
  int64_t M, N, K, kb, J, P;
};

// Where a tile's sums go: out's f32 or bf16 row-major storage at the tile's first row and column
// (all nr columns out's; an edge tile goes through an f32 buffer), ld apart; beta * out is where
// the first block's sums start (out not read where beta is 0).
struct TileOut {
  float* f32;
  bf16_t* bf16;
  int64_t ld;
  float beta;
};

// One out tile of R rows: a's rows (FP32 values, row stride lda) against one panel of b, over
// every K block; sa: the rows' scales (R x J, alpha in them); sb: the panel's columns' scales,
// block j's at sb + j P nr; c: R x nr floats, the running sums between K blocks. For each block
// j in turn it sums the products in FP32, in K order, and promotes them:
// c = c + (sa(r, j) sb(n, j)) T(r, n), the first block starting from beta * out (from 0 where
// beta is 0), the last one's going to out (f32, or bf16 rounded to nearest even).
using TileFn = void (*)(const Geometry& g, const float* a, int64_t lda, const float* panel,
                        const float* sa, const float* sb, float* c, const TileOut& out);

// A vector width's tiles: tiles[R - 1] takes R rows, R = 1 .. mr; nr columns each.
struct TileSet {
  int mr;
  int64_t nr;
  std::span<const TileFn> tiles;
};

// The largest tiles of any set (the driver's buffers are sized by them).
inline constexpr int kMaxMR = 12;
inline constexpr int64_t kMaxNR = 32;

// out (M, N) = beta * out + the K-block product of a and b (kblock_gemm.h: codes with FP32 block
// scales, or local values in one block), its tiles run by `tiles`. The caller checks the CPU and
// the operands.
void kblock_gemm_fp32(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                      KBlockValues values, const TileSet& tiles, Stream& stream);

}  // namespace h2::cpu::kblock_fp32
