// Attention's block products in register tiles (attention_tiles.h). One generic body in GCC
// vector types, compiled three times: 4-float vectors under the build's own flags (the path of a
// CPU without AVX2, where H2_CPU_ARCH builds for one), 8 under AVX2 + FMA and 16 under AVX-512,
// each instance inlined into an entry point that carries its target, so that one binary holds all
// three and the CPU picks at run time.
//
// A tile keeps MR x 2 vectors of C in registers while k runs: per k, two unaligned loads of B's
// row, and per row one broadcast of A(m, k) and two FMAs. MR is 6 for 16 registers (12
// accumulators) and 8 for AVX-512's 32 (16 accumulators: a 64-row block in 8 tiles). Columns
// come two vectors at a time, then one; the last N % lanes columns go through a scalar loop.
// Column tiles are the outer loop, so that B's slice of two vectors stays in L1 across the rows.
#include "backends/cpu/kernels/attention_tiles.h"

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"

namespace h2::cpu::attention {
namespace {

typedef float Lanes4 __attribute__((vector_size(16)));
typedef float Lanes8 __attribute__((vector_size(32)));
typedef float Lanes16 __attribute__((vector_size(64)));

template <class V>
constexpr int kLanes = int(sizeof(V) / sizeof(float));
template <class V>
constexpr int kTileRows = sizeof(V) == 64 ? 8 : 6;

// One tile's operands: its first row of A and of C, its first column of B and C, and the k range.
struct TileArgs {
  const float* a;
  int64_t a_ms, a_ks;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  int64_t k_begin, k_end;
  float alpha;
  bool accumulate;
};

// C (MR, NV vectors) = alpha * sum over k of A(i, k) B(k, :), plus C when accumulating.
// kUnitM: A's m stride is 1 (A^T of a row-major block), so that the broadcasts of a k step
// address A at constant offsets instead of through MR - 1 strides the registers cannot all hold
// (AVX2, one core: the A^T products ran at 80% of the FMA peak with the strides, 85% without;
// the others at 95%).
template <class V, int MR, int NV, bool kUnitM>
[[gnu::always_inline]] inline void tile(const TileArgs& t) {
  constexpr int L = kLanes<V>;
  const int64_t a_ms = kUnitM ? 1 : t.a_ms;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t k = t.k_begin; k < t.k_end; ++k) {
    const float* b_row = t.b + k * t.ldb;
    V b[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) std::memcpy(&b[j], b_row + j * L, sizeof(V));
    const float* a_col = t.a + k * t.a_ks;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const float a = a_col[i * a_ms];
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      float* out = t.c + i * t.ldc + j * L;
      V result = t.alpha * acc[i][j];
      if (t.accumulate) {
        V old;
        std::memcpy(&old, out, sizeof(V));
        result += old;
      }
      std::memcpy(out, &result, sizeof(V));
    }
}

// The tile of `rows` rows (1 to R), each instance a register tile of its own.
template <class V, int NV, bool kUnitM, int R = kTileRows<V>>
[[gnu::always_inline]] inline void tile_of_rows(int rows, const TileArgs& t) {
  if constexpr (R == 1) {
    tile<V, 1, NV, kUnitM>(t);
  } else if (rows == R) {
    tile<V, R, NV, kUnitM>(t);
  } else {
    tile_of_rows<V, NV, kUnitM, R - 1>(rows, t);
  }
}

// The last `cols` (fewer than a vector's) columns of `rows` rows, one value at a time.
inline void scalar_columns(int rows, int64_t cols, const TileArgs& t) {
  for (int i = 0; i < rows; ++i)
    for (int64_t n = 0; n < cols; ++n) {
      float sum = 0;
      for (int64_t k = t.k_begin; k < t.k_end; ++k)
        sum += t.a[i * t.a_ms + k * t.a_ks] * t.b[k * t.ldb + n];
      float& out = t.c[i * t.ldc + n];
      out = t.alpha * sum + (t.accumulate ? out : 0.0f);
    }
}

// What the mask leaves rows [m0, m0 + rows): their k range, and the columns they need.
struct RowsExtent {
  int64_t k_begin, k_end, n_end;
};

RowsExtent rows_extent(const TileProduct& p, int64_t m0, int64_t rows) {
  RowsExtent e{0, p.K, p.N};
  const int64_t past_last = m0 + rows + p.diagonal;  // one past the last row's last key
  switch (p.masked) {
    case Masked::none:
      break;
    case Masked::columns:
      e.n_end = std::clamp<int64_t>(past_last, 0, p.N);
      break;
    case Masked::k_after_diagonal:
      e.k_end = std::clamp<int64_t>(past_last, 0, p.K);
      break;
    case Masked::k_before_diagonal:
      e.k_begin = std::clamp<int64_t>(m0 - p.diagonal, 0, p.K);
      break;
  }
  return e;
}

template <class V, bool kUnitM>
[[gnu::always_inline]] inline void product(const TileProduct& p, ScalarOperand a, RowOperand b,
                                           float* c, int64_t ldc) {
  constexpr int64_t L = kLanes<V>;
  constexpr int64_t MR = kTileRows<V>;
  for (int64_t n0 = 0; n0 < p.N;) {
    const int64_t left = p.N - n0;
    const int64_t width = left >= 2 * L ? 2 * L : (left >= L ? L : left);
    for (int64_t m0 = 0; m0 < p.M; m0 += MR) {
      const int rows = int(std::min(MR, p.M - m0));
      const RowsExtent e = rows_extent(p, m0, rows);
      if (n0 >= e.n_end) continue;
      const TileArgs t{a.data + m0 * a.m_stride,
                       a.m_stride,
                       a.k_stride,
                       b.data + n0,
                       b.ld,
                       c + m0 * ldc + n0,
                       ldc,
                       e.k_begin,
                       e.k_end,
                       p.alpha,
                       p.accumulate};
      if (width == 2 * L) {
        tile_of_rows<V, 2, kUnitM>(rows, t);
      } else if (width == L) {
        tile_of_rows<V, 1, kUnitM>(rows, t);
      } else {
        scalar_columns(rows, width, t);
      }
    }
    n0 += width;
  }
}

void product_portable(const TileProduct& p, ScalarOperand a, RowOperand b, float* c, int64_t ldc) {
  a.m_stride == 1 ? product<Lanes4, true>(p, a, b, c, ldc)
                  : product<Lanes4, false>(p, a, b, c, ldc);
}

[[gnu::target("avx2,fma")]] void product_avx2(const TileProduct& p, ScalarOperand a, RowOperand b,
                                              float* c, int64_t ldc) {
  a.m_stride == 1 ? product<Lanes8, true>(p, a, b, c, ldc)
                  : product<Lanes8, false>(p, a, b, c, ldc);
}

[[gnu::target("avx512f")]] void product_avx512(const TileProduct& p, ScalarOperand a, RowOperand b,
                                               float* c, int64_t ldc) {
  a.m_stride == 1 ? product<Lanes16, true>(p, a, b, c, ldc)
                  : product<Lanes16, false>(p, a, b, c, ldc);
}

}  // namespace

const char* tile_isa_name(TileIsa isa) {
  switch (isa) {
    case TileIsa::portable:
      return "portable";
    case TileIsa::avx2:
      return "avx2";
    case TileIsa::avx512:
      return "avx512";
  }
  return "?";
}

bool tile_isa_available(TileIsa isa) {
  switch (isa) {
    case TileIsa::portable:
      return true;
    case TileIsa::avx2:
      return cpu_has(CpuFeature::avx2) && cpu_has(CpuFeature::fma);
    case TileIsa::avx512:
      return cpu_has(CpuFeature::avx512f);
  }
  return false;
}

TileIsa best_tile_isa() {
  static const TileIsa best = tile_isa_available(TileIsa::avx512) ? TileIsa::avx512
                              : tile_isa_available(TileIsa::avx2) ? TileIsa::avx2
                                                                  : TileIsa::portable;
  return best;
}

namespace {

void run_product(TileIsa isa, const TileProduct& p, ScalarOperand a, RowOperand b, float* c,
                 int64_t ldc) {
  H2_CHECK(p.M >= 0 && p.N >= 0 && p.K >= 0,
           "attention tile_product: negative extent M {} N {} K {}", p.M, p.N, p.K);
  switch (isa) {
    case TileIsa::portable:
      return product_portable(p, a, b, c, ldc);
    case TileIsa::avx2:
      return product_avx2(p, a, b, c, ldc);
    case TileIsa::avx512:
      return product_avx512(p, a, b, c, ldc);
  }
}

}  // namespace

void tile_product(const TileProduct& p, ScalarOperand a, RowOperand b, float* c, int64_t ldc) {
  run_product(best_tile_isa(), p, a, b, c, ldc);
}

void tile_product(TileIsa isa, const TileProduct& p, ScalarOperand a, RowOperand b, float* c,
                  int64_t ldc) {
  H2_CHECK(tile_isa_available(isa), "attention tile_product: this CPU cannot run the {} tiles",
           tile_isa_name(isa));
  run_product(isa, p, a, b, c, ldc);
}

}  // namespace h2::cpu::attention
