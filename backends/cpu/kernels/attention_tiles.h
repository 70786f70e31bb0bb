// The block products of CPU causal attention (attention_fwd.cpp, attention_bwd.cpp) as
// register-tiled GEMMs that read their operands through strides, with no packing, and skip the
// tiles the causal mask empties. Every product there is one of
//   C (M, N) = alpha * A B   or   C += alpha * A B,
// with A read element by element through two strides (so that A or A^T of a row-major block is
// the same call) and B read a row of N floats at a time. A general GEMM library packs both
// operands on each call and computes every masked score: at T = 128 a third of its work.
//
// Glossary: M, N, K the product's extents; a tile is MR rows of C by 2 vectors of columns, held
// in registers while k runs; "diagonal" is the position of the block's first query minus that of
// its first key (q0 - k0), so query row i sees key column c when c <= i + diagonal.
#pragma once

#include <cstdint>

namespace h2::cpu::attention {

// A (M, K) read by element: A(m, k) = data[m * m_stride + k * k_stride]. A row-major (M, K)
// block with row stride ld is {data, ld, 1}; the transpose of a row-major (K, M) block is
// {data, 1, ld}.
struct ScalarOperand {
  const float* data;
  int64_t m_stride;
  int64_t k_stride;
};

// B (K, N) read by rows: row k's N floats start at data + k * ld.
struct RowOperand {
  const float* data;
  int64_t ld;
};

// Which of the product's axes are query and key positions, and so what the mask removes.
enum class Masked {
  none,
  // m queries, n keys (scores): C(m, n) is needed only where n <= m + diagonal. Tiles wholly
  // past the diagonal are not written; the caller reads no further than each row's last key.
  columns,
  // m queries, k keys (P V, dS K): A(m, k) is 0 where k > m + diagonal, so k stops at the
  // tile's last row's last key.
  k_after_diagonal,
  // m keys, k queries (P^T dO, dS^T Q): A(m, k) is 0 where k < m - diagonal, so k starts at
  // the tile's first row's first query.
  k_before_diagonal,
};

struct TileProduct {
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.0f;
  bool accumulate = false;  // C += alpha * A B instead of C = alpha * A B
  Masked masked = Masked::none;
  int64_t diagonal = 0;
};

// The instruction sets the products are built for, oldest first; each runs where the CPU has it
// (cpu_features.h, under H2_CPU_MAX_ISA).
enum class TileIsa { portable, avx2, avx512 };
const char* tile_isa_name(TileIsa isa);
bool tile_isa_available(TileIsa isa);
TileIsa best_tile_isa();

// C (row stride ldc) per `p`, with the newest instruction set the CPU allows, or with `isa`
// (which must be available). M, N, K >= 0; C must not overlap A or B.
void tile_product(const TileProduct& p, ScalarOperand a, RowOperand b, float* c, int64_t ldc);
void tile_product(TileIsa isa, const TileProduct& p, ScalarOperand a, RowOperand b, float* c,
                  int64_t ldc);

}  // namespace h2::cpu::attention
