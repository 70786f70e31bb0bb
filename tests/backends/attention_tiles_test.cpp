// Attention's tile products (backends/cpu/kernels/attention_tiles.h) against a double-precision
// loop, on every instruction set this CPU runs (H2_CPU_MAX_ISA hides the newer ones in the capped
// runs): each causal mask, A read by rows and transposed, alpha, accumulation, strided operands,
// and extents on both sides of the register tile's (8 or 6 rows, 2 vectors of columns) and of a
// vector. Entries a product must not write (the padding past N, and score tiles wholly past the
// diagonal) must keep their sentinel, and masked terms of A that no tile may read hold NaN.
#include "backends/cpu/kernels/attention_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace h2::cpu::attention {
namespace {

constexpr TileIsa kAllIsas[] = {TileIsa::portable, TileIsa::avx2, TileIsa::avx512};
constexpr float kSentinel = -7777.0f;
constexpr int64_t kMostTileRows = 8;      // 6 with 16 registers, 8 with AVX-512's 32
constexpr int64_t kMostTileColumns = 32;  // two vectors of 16

struct Case {
  int64_t M, N, K;
  Masked masked;
  int64_t diagonal;
  bool a_transposed;  // A stored as (K, M), read with m stride 1
  bool accumulate;
  float alpha;

  std::string str() const {
    return "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) +
           " mask " + std::to_string(int(masked)) + " diagonal " + std::to_string(diagonal) +
           (a_transposed ? " A^T" : " A") + (accumulate ? " +=" : " =") + " alpha " +
           std::to_string(alpha);
  }
  // Whether A(m, k) is a term the mask keeps (elsewhere the caller's A holds 0).
  bool term_kept(int64_t m, int64_t k) const {
    if (masked == Masked::k_after_diagonal) return k <= m + diagonal;
    if (masked == Masked::k_before_diagonal) return k >= m - diagonal;
    return true;
  }
  // Whether A(m, k) is a masked term that no tile reaches: its k lies beyond the range the mask
  // leaves the tile of at most kMostTileRows rows that holds row m.
  bool never_read(int64_t m, int64_t k) const {
    if (masked == Masked::k_after_diagonal) return k >= m + diagonal + kMostTileRows;
    if (masked == Masked::k_before_diagonal) return k <= m - diagonal - kMostTileRows;
    return false;
  }
  // Whether C(m, n) must hold the product (a score a row reads).
  bool needed(int64_t m, int64_t n) const { return masked != Masked::columns || n <= m + diagonal; }
};

// Runs one case on `isa` and checks every entry of C, its padding included.
void check_case(TileIsa isa, const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t a_rows = c.a_transposed ? c.K : c.M, a_cols = c.a_transposed ? c.M : c.K;
  const int64_t lda = a_cols + 3, ldb = c.N + 5, ldc = c.N + 7;
  std::vector<float> a(size_t(std::max<int64_t>(a_rows, 1) * lda));
  std::vector<float> b(size_t(std::max<int64_t>(c.K, 1) * ldb));
  std::vector<float> out(size_t(std::max<int64_t>(c.M, 1) * ldc), kSentinel);
  for (float& x : b) x = value(rng);
  auto a_at = [&](int64_t m, int64_t k) -> float& {
    return c.a_transposed ? a[size_t(k * lda + m)] : a[size_t(m * lda + k)];
  };
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t k = 0; k < c.K; ++k)
      a_at(m, k) = c.term_kept(m, k) ? value(rng) : (c.never_read(m, k) ? NAN : 0.0f);
  std::vector<float> before = out;
  if (c.accumulate)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) before[size_t(m * ldc + n)] = value(rng);
  out = before;

  const TileProduct p{.M = c.M,
                      .N = c.N,
                      .K = c.K,
                      .alpha = c.alpha,
                      .accumulate = c.accumulate,
                      .masked = c.masked,
                      .diagonal = c.diagonal};
  const ScalarOperand a_op =
      c.a_transposed ? ScalarOperand{a.data(), 1, lda} : ScalarOperand{a.data(), lda, 1};
  tile_product(isa, p, a_op, {b.data(), ldb}, out.data(), ldc);

  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < ldc; ++n) {
      const float got = out[size_t(m * ldc + n)];
      const float old = before[size_t(m * ldc + n)];
      const std::string where = std::string(tile_isa_name(isa)) + " " + c.str() + ": C(" +
                                std::to_string(m) + ", " + std::to_string(n) + ")";
      if (n >= c.N) {
        ASSERT_EQ(got, kSentinel) << where << " is padding past N";
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        if (!c.term_kept(m, k)) continue;  // 0, or NaN where no tile may read it
        const double term = double(a_at(m, k)) * double(b[size_t(k * ldb + n)]);
        sum += term;
        magnitude += std::fabs(term);
      }
      const double want = double(c.alpha) * sum + (c.accumulate ? double(old) : 0.0);
      const double tolerance =
          1e-6 * (std::fabs(c.alpha) * magnitude + (c.accumulate ? std::fabs(old) : 0.0)) + 1e-30;
      if (c.needed(m, n)) {
        ASSERT_NEAR(got, want, tolerance) << where;
      } else {
        // A score past the row's last key: computed with its tile, or left alone.
        if (got != old) {
          ASSERT_NEAR(got, want, tolerance) << where << " (past the diagonal)";
        }
        // A tile spans at most kMostTileRows rows and kMostTileColumns columns: further out,
        // nothing is written.
        if (n >= m + c.diagonal + kMostTileRows + kMostTileColumns) {
          ASSERT_EQ(got, old) << where << " was not skipped";
        }
      }
    }
}

std::vector<TileIsa> available_isas() {
  std::vector<TileIsa> isas;
  for (TileIsa isa : kAllIsas)
    if (tile_isa_available(isa)) isas.push_back(isa);
  return isas;
}

TEST(AttentionTiles, UnmaskedProductsMatchADoubleLoop) {
  std::mt19937 rng(1);
  for (TileIsa isa : available_isas())
    for (int64_t M : {1, 5, 6, 7, 8, 13, 64})
      for (int64_t N : {1, 3, 8, 15, 16, 17, 33, 64})
        for (int64_t K : {0, 1, 7, 32})
          for (bool a_transposed : {false, true})
            for (bool accumulate : {false, true})
              check_case(isa, {M, N, K, Masked::none, 0, a_transposed, accumulate, 0.37f}, rng);
}

TEST(AttentionTiles, ScoresAreWrittenUpToEachRowsLastKeyAndSkippedFarPastIt) {
  std::mt19937 rng(2);
  for (TileIsa isa : available_isas())
    for (int64_t M : {7, 64})
      for (int64_t N : {9, 64, 130})
        for (int64_t K : {5, 32})
          for (int64_t diagonal : {0, 5, 64})
            check_case(isa, {M, N, K, Masked::columns, diagonal, false, false, 0.125f}, rng);
}

TEST(AttentionTiles, KeyRangesStopAtTheDiagonalAndNeverReadPastIt) {
  std::mt19937 rng(3);
  for (TileIsa isa : available_isas())
    for (Masked masked : {Masked::k_after_diagonal, Masked::k_before_diagonal})
      for (int64_t M : {7, 64, 70})
        for (int64_t K : {9, 64, 128})
          for (int64_t diagonal : {0, 3, 64})
            for (bool a_transposed : {false, true})
              for (bool accumulate : {false, true})
                check_case(isa,
                           {M, 33, K, masked, diagonal, a_transposed, accumulate,
                            accumulate ? 1.0f : 0.3f},
                           rng);
}

TEST(AttentionTiles, EveryIsaAtOrBelowTheBestIsAvailable) {
  EXPECT_TRUE(tile_isa_available(TileIsa::portable));
  const TileIsa best = best_tile_isa();
  for (TileIsa isa : kAllIsas)
    EXPECT_EQ(tile_isa_available(isa), isa <= best) << tile_isa_name(isa);
}

// Checks something only where an ISA is missing: in the capped runs (H2_CPU_MAX_ISA=avx2 hides
// AVX-512), or on a CPU without it.
TEST(AttentionTiles, AnIsaTheCpuLacksIsRefusedByName) {
  float a = 1, b = 1, c = 0;
  for (TileIsa isa : kAllIsas) {
    if (tile_isa_available(isa)) continue;
    try {
      tile_product(isa, {.M = 1, .N = 1, .K = 1}, {&a, 1, 1}, {&b, 1}, &c, 1);
      FAIL() << tile_isa_name(isa) << " ran on a CPU without it";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(tile_isa_name(isa)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace h2::cpu::attention
