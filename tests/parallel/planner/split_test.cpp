// The inner level of the search (parallel/planner/search.h). split_layers: on random problems
// (2-5 positions, 2-12 layers, random costs, tight and infeasible memory limits) its split
// reaches the minimum of f = sum_q c_q + (m - 1) max_q c_q, c_q = fixed_q + b_q block_q, found by
// a brute force over every composition of the layers (each part within its position's limit);
// the split it returns is feasible, and it says nullopt exactly when no composition is.
// all_splits: on random problems (1-6 positions, 1-12 layers, limits from 0 to ample) it returns
// exactly the brute force's set of compositions when there are at most `limit`, and nullopt when
// there are more; an empty list when some position holds no block, the positions outnumber the
// layers or their limits add up to fewer; and it answers at once for 40 positions and 80 layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "parallel/planner/search.h"

namespace h2::parallel::planner {
namespace {

double objective(const SplitProblem& p, const std::vector<int>& blocks) {
  double sum = 0, most = 0;
  for (size_t q = 0; q < blocks.size(); ++q) {
    const double c = p.fixed_s[q] + double(blocks[q]) * p.block_s[q];
    sum += c;
    most = std::max(most, c);
  }
  return sum + double(p.micro_batches - 1) * most;
}

// Every composition of the layers with each part 1..max_blocks[q].
std::vector<std::vector<int>> compositions(const SplitProblem& p) {
  const size_t P = p.max_blocks.size();
  std::vector<std::vector<int>> out;
  std::vector<int> blocks(P, 0);
  std::function<void(size_t, int)> place = [&](size_t q, int left) {
    if (q == P) {
      if (left == 0) out.push_back(blocks);
      return;
    }
    for (int b = 1; b <= std::min(left, p.max_blocks[q]); ++b) {
      blocks[q] = b;
      place(q + 1, left - b);
    }
  };
  if (P > 0) place(0, p.layers);
  return out;
}

// The least objective over every composition of the layers, or nullopt when none is feasible.
std::optional<double> brute_force(const SplitProblem& p) {
  std::optional<double> best;
  for (const std::vector<int>& blocks : compositions(p)) {
    const double f = objective(p, blocks);
    if (!best || f < *best) best = f;
  }
  return best;
}

void expect_feasible(const SplitProblem& p, const std::vector<int>& blocks) {
  ASSERT_EQ(blocks.size(), p.block_s.size());
  int total = 0;
  for (size_t q = 0; q < blocks.size(); ++q) {
    EXPECT_GE(blocks[q], 1) << "position " << q;
    EXPECT_LE(blocks[q], p.max_blocks[q]) << "position " << q;
    total += blocks[q];
  }
  EXPECT_EQ(total, p.layers);
}

SplitProblem random_problem(std::mt19937& rng) {
  std::uniform_int_distribution<int> positions(2, 5), layers(2, 12), micro(1, 16);
  std::uniform_real_distribution<double> cost(0.1, 3.0), fixed(0.0, 4.0);
  SplitProblem p;
  const int P = positions(rng);
  p.layers = layers(rng);
  p.micro_batches = micro(rng);
  const int mode = int(rng() % 3);  // 0: loose, 1: tight, 2: very tight (often infeasible)
  for (int q = 0; q < P; ++q) {
    p.block_s.push_back(cost(rng));
    p.fixed_s.push_back(rng() % 4 == 0 ? 0.0 : fixed(rng));
    int limit = p.layers;
    if (mode == 1) limit = 1 + int(rng() % unsigned(std::max(1, p.layers / P + 2)));
    if (mode == 2) limit = int(rng() % unsigned(std::max(1, p.layers / P + 1)));
    p.max_blocks.push_back(limit);
  }
  return p;
}

TEST(SplitLayers, ReachesTheBruteForceMinimumOnRandomProblems) {
  std::mt19937 rng(20240611);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const SplitProblem p = random_problem(rng);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << p.block_s.size() << " positions, " << p.layers
                 << " layers, m " << p.micro_batches);
    const std::optional<double> want = brute_force(p);
    const std::optional<std::vector<int>> got = split_layers(p);
    ASSERT_EQ(got.has_value(), want.has_value());
    if (!got) {
      ++infeasible;
      continue;
    }
    ++feasible;
    expect_feasible(p, *got);
    EXPECT_NEAR(objective(p, *got), *want, 1e-9 * std::max(1.0, *want));
  }
  // The generator covers both outcomes.
  EXPECT_GT(feasible, 200);
  EXPECT_GT(infeasible, 50);
}

TEST(SplitLayers, EqualPositionsSplitEvenly) {
  // 3 equal positions, 9 layers, no fixed costs: 3 + 3 + 3 is the only minimiser for m > 1.
  const SplitProblem p{.layers = 9,
                       .micro_batches = 4,
                       .block_s = {1, 1, 1},
                       .fixed_s = {0, 0, 0},
                       .max_blocks = {9, 9, 9}};
  EXPECT_EQ(split_layers(p), (std::vector<int>{3, 3, 3}));
}

TEST(SplitLayers, AFasterPositionTakesMoreLayersUntilItsMemoryIsFull) {
  // Position 0 runs a block in 1 s, position 1 in 2 s: with 6 layers 4 + 2 balances them
  // (c = 4 and 4). Memory for 3 blocks on position 0 forces 3 + 3 (c = 3 and 6).
  SplitProblem p{
      .layers = 6, .micro_batches = 8, .block_s = {1, 2}, .fixed_s = {0, 0}, .max_blocks = {6, 6}};
  EXPECT_EQ(split_layers(p), (std::vector<int>{4, 2}));
  p.max_blocks = {3, 6};
  EXPECT_EQ(split_layers(p), (std::vector<int>{3, 3}));
}

TEST(SplitLayers, MoreMicroBatchesWeighTheMaximumMore) {
  // c = (fixed 0 + 2 b0, fixed 3 + 1 b1), 5 layers. m = 1 minimises the sum: 1 + 4 (sum 9,
  // max 7); 2 + 3 has sum 10, max 6; with m = 4 it wins (10 + 18 = 28 against 9 + 21 = 30).
  SplitProblem p{
      .layers = 5, .micro_batches = 1, .block_s = {2, 1}, .fixed_s = {0, 3}, .max_blocks = {5, 5}};
  EXPECT_EQ(split_layers(p), (std::vector<int>{1, 4}));
  p.micro_batches = 4;
  EXPECT_EQ(split_layers(p), (std::vector<int>{2, 3}));
}

TEST(SplitLayers, NoSplitWhenPositionsOutnumberLayersOrMemoryHoldsTooFew) {
  EXPECT_FALSE(split_layers({.layers = 2,
                             .micro_batches = 1,
                             .block_s = {1, 1, 1},
                             .fixed_s = {0, 0, 0},
                             .max_blocks = {2, 2, 2}}));
  EXPECT_FALSE(split_layers({.layers = 5,
                             .micro_batches = 2,
                             .block_s = {1, 1},
                             .fixed_s = {0, 0},
                             .max_blocks = {2, 2}}));
  EXPECT_FALSE(split_layers({.layers = 2,
                             .micro_batches = 2,
                             .block_s = {1, 1},
                             .fixed_s = {0, 0},
                             .max_blocks = {0, 2}}));
}

TEST(AllSplits, ListsExactlyTheFittingCompositions) {
  std::mt19937 rng(77);
  int listed = 0, over = 0, none = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    SplitProblem p;
    const int P = 1 + int(rng() % 6);
    p.layers = 1 + int(rng() % 12);
    for (int q = 0; q < P; ++q) {
      p.max_blocks.push_back(int(rng() % unsigned(p.layers + 2)));
      p.block_s.push_back(1), p.fixed_s.push_back(0);
    }
    if (rng() % 2) std::replace(p.max_blocks.begin(), p.max_blocks.end(), 0, 1);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << P << " positions, " << p.layers << " layers");
    std::vector<std::vector<int>> want = compositions(p);
    std::sort(want.begin(), want.end());
    const int64_t n = int64_t(want.size());
    for (int64_t limit : {n, n + 1, int64_t(64), n - 1, int64_t(0)}) {
      if (limit < 0) continue;
      std::optional<std::vector<std::vector<int>>> got = all_splits(p, limit);
      if (n > limit) {
        EXPECT_FALSE(got.has_value()) << "limit " << limit << ", " << n << " splits";
        over += !got;
        continue;
      }
      ASSERT_TRUE(got.has_value()) << "limit " << limit << ", " << n << " splits";
      std::sort(got->begin(), got->end());
      EXPECT_EQ(*got, want) << "limit " << limit;  // each once, and nothing else
      listed += n > 0;
      none += n == 0;
    }
  }
  EXPECT_GT(listed, 1000);
  EXPECT_GT(over, 500);
  EXPECT_GT(none, 300);
}

TEST(AllSplits, AnswersAtOnceForManyPositions) {
  const auto started = std::chrono::steady_clock::now();
  SplitProblem p{.layers = 80,
                 .micro_batches = 8,
                 .block_s = std::vector<double>(40, 1.0),
                 .fixed_s = std::vector<double>(40, 0.0),
                 .max_blocks = std::vector<int>(40, 80)};
  // C(79, 39) splits: more than any limit.
  EXPECT_FALSE(all_splits(p, 64).has_value());
  EXPECT_FALSE(all_splits(p, 1000).has_value());
  // A position that holds no block: no split.
  p.max_blocks[17] = 0;
  EXPECT_EQ(all_splits(p, 64), std::vector<std::vector<int>>{});
  p.max_blocks[17] = 80;
  p.max_blocks.back() = 0;
  EXPECT_EQ(all_splits(p, 64), std::vector<std::vector<int>>{});
  // Limits adding up to 79 blocks: no split.
  p.max_blocks.assign(40, 2);
  p.max_blocks[3] = 1;
  EXPECT_EQ(all_splits(p, 64), std::vector<std::vector<int>>{});
  // Limits adding up to exactly 80: one split; one more block of room: 40 splits.
  p.max_blocks[3] = 2;
  EXPECT_EQ(all_splits(p, 64), std::vector<std::vector<int>>{std::vector<int>(40, 2)});
  p.max_blocks[3] = 3;
  const auto some = all_splits(p, 64);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(some->size(), 40u);
  // More positions than layers, or none.
  p.layers = 39;
  EXPECT_EQ(all_splits(p, 64), std::vector<std::vector<int>>{});
  EXPECT_EQ(all_splits(SplitProblem{.layers = 3}, 64), std::vector<std::vector<int>>{});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace h2::parallel::planner
