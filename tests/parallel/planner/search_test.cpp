// The plan search (parallel/planner/search.h) against the brute force of search_brute_force.h,
// which enumerates the documented outer space itself and prices every layer split of every outer
// configuration with estimate() (cost_model.h). On random small clusters (2-4 chips of 1-3 types,
// 2-6 layers, so every split problem has at most 10 splits and the search prices them all), with
// ample and with tight memory and every plan kept (so no bound cuts anything):
//   - the best plan's step time equals the brute-force optimum (1e-12 relative), and the whole
//     ranked list equals the brute force's per-configuration optima, one per configuration that
//     has a fitting split, each plan re-priced by estimate() to the same step time;
//   - the counts equal the brute force's: classes (less those the documented class memory bound
//     rules out), classes expanded, outer configurations, plans costed (the splits that fit: the
//     search's memory limit per position is exact), memory_pruned (ruled-out classes plus
//     configurations no split fits even with recomputation, interleaved ones included); the
//     gap is 0;
//   - no class the memory bound rules out holds a fitting plan (the bound is valid);
//   - the plans are in the space (rows, micro-batches, replicas) and the too-large ones do not fit.
// Branch and bound, budgets and threads: search_bound_test.cpp; hand-built memory cases and
// explain(): search_memory_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/parallel/planner/search_brute_force.h"

namespace h2::parallel::planner {
namespace {

using brute::Job;

struct Seen {  // what the random jobs covered
  int trials = 0, with_plan = 0, classes_ruled_out = 0, configurations_pruned = 0,
      recomputing_best = 0, fsdp_best = 0, several_positions = 0, interleaved = 0, too_large = 0,
      recompute_would_win = 0;
};

void expect_plan_in_space(const Job& job, const Candidate& c) {
  const Plan& p = c.plan;
  const int L = int(job.m.n_layers);
  EXPECT_EQ(int64_t(p.replicas) * p.micro_batches * p.micro_batch_rows, job.space.global_rows);
  EXPECT_GE(p.micro_batches, p.positions());
  EXPECT_LE(p.positions(), job.space.max_stages > 0 ? std::min(job.space.max_stages, L) : L);
  if (job.space.max_micro_batch_rows > 0) {
    EXPECT_LE(p.micro_batch_rows, job.space.max_micro_batch_rows);
  }
  for (int g : p.group_sizes) EXPECT_EQ(p.micro_batch_rows % g, 0);
  EXPECT_LE(p.world_size(), job.cluster.size());
  EXPECT_EQ(p.layout.stages(), p.positions() * p.chunks);
  if (p.wire_dtype) {
    EXPECT_NE(*p.wire_dtype, DType::f32);
    EXPECT_GT(p.positions(), 1);
  }
  if (p.chunks > 1) {
    EXPECT_EQ(p.schedule, pipeline::ScheduleKind::kInterleaved1F1B);
    EXPECT_EQ(p.micro_batches % p.positions(), 0);
    EXPECT_EQ(L % (2 * p.positions()), 0);
  }
  if (p.fsdp) {
    EXPECT_TRUE(job.space.fsdp);
  }
  if (p.recompute) {
    EXPECT_TRUE(job.space.recompute);
  }
  EXPECT_TRUE(c.estimate.fits()) << p.str();
  EXPECT_EQ(estimate(p, job.inputs()).step_s, c.estimate.step_s) << p.str();
  EXPECT_DOUBLE_EQ(c.tokens_per_s, c.estimate.tokens_per_s(p, job.m));
}

void expect_exact(const Job& job, Seen& seen) {
  const SearchResult r = search(job.cluster, job.inputs(), job.space);
  const brute::Result want = brute::brute_force(job);
  ++seen.trials;
  // Counts.
  EXPECT_EQ(r.classes, want.kept);
  EXPECT_EQ(r.classes_expanded, want.kept);
  EXPECT_EQ(r.outer_candidates, want.outers);
  EXPECT_EQ(r.costed, want.costed);
  EXPECT_EQ(r.memory_pruned, want.memory_pruned);
  EXPECT_EQ(r.optimality_gap, 0);
  // The class memory bound is a true bound: a class it rules out has no fitting plan.
  for (const brute::Class& k : want.classes) {
    if (!k.ruled_out) continue;
    ++seen.classes_ruled_out;
    for (const brute::Outer& o : k.outers) EXPECT_EQ(o.any, brute::kInf) << "class " << k.key;
  }
  seen.configurations_pruned +=
      int(want.memory_pruned - (int64_t(want.classes.size()) - want.kept));
  // The ranked list: one plan per configuration that fits, each its configuration's optimum.
  ASSERT_EQ(r.best.size(), want.steps.size());
  for (size_t i = 0; i < r.best.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "plan " << i << ": " << r.best[i].plan.str());
    EXPECT_NEAR(r.best[i].estimate.step_s, want.steps[i], 1e-12 * want.steps[i]);
    if (i > 0) {
      EXPECT_LE(r.best[i - 1].estimate.step_s, r.best[i].estimate.step_s);
    }
    expect_plan_in_space(job, r.best[i]);
    seen.interleaved += r.best[i].plan.chunks > 1;
  }
  EXPECT_LE(r.too_large.size(), 3u);
  for (const Candidate& c : r.too_large) EXPECT_FALSE(c.estimate.fits()) << c.plan.str();
  seen.too_large += !r.too_large.empty();
  if (r.best.empty()) {
    EXPECT_EQ(want.any, brute::kInf);
    return;
  }
  // The optimum over every configuration and every split.
  const Plan& best = r.best.front().plan;
  EXPECT_NEAR(r.best.front().estimate.step_s, want.optimum, 1e-12 * want.optimum) << best.str();
  ++seen.with_plan;
  seen.recomputing_best += best.recompute;
  seen.fsdp_best += best.fsdp;
  seen.several_positions += best.positions() > 1;
  // Recomputation is tried only where nothing fits without it; note where it would have won.
  seen.recompute_would_win += want.any < want.optimum * (1 - 1e-12);
}

void run(int64_t memory, int trials, uint32_t seed, Seen& seen) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const Job job = brute::random_job(rng, {.memory = memory});
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << job.cluster.size() << " chips of "
                 << job.cluster.chip_types().size() << " types, " << job.m.n_layers << " layers, "
                 << job.space.global_rows << " rows, memory " << job.cluster.chips[0].memory_bytes);
    expect_exact(job, seen);
  }
  std::printf(
      "%d jobs: %d with a plan (%d on several positions, %d fsdp, %d recomputing), %d classes "
      "ruled out by memory, %d configurations no split fits, %d interleaved plans, %d with "
      "too-large plans, %d where recomputation would have been faster\n",
      seen.trials, seen.with_plan, seen.several_positions, seen.fsdp_best, seen.recomputing_best,
      seen.classes_ruled_out, seen.configurations_pruned, seen.interleaved, seen.too_large,
      seen.recompute_would_win);
}

TEST(Search, BestIsTheBruteForceOptimumWithAmpleMemory) {
  Seen seen;
  run(int64_t(1) << 30, 60, 1234, seen);
  EXPECT_GE(seen.with_plan, 50);
  EXPECT_GE(seen.several_positions, 10);
  EXPECT_GE(seen.fsdp_best, 1);
  EXPECT_GT(seen.interleaved, 0);
  EXPECT_EQ(seen.classes_ruled_out, 0);
  EXPECT_EQ(seen.configurations_pruned, 0);
}

TEST(Search, BestIsTheBruteForceOptimumWithTightMemory) {
  Seen seen;
  run(0, 80, 99, seen);
  // The generator covers each memory outcome.
  EXPECT_GE(seen.with_plan, 20);
  EXPECT_GE(seen.recomputing_best, 3);
  EXPECT_GE(seen.classes_ruled_out, 5);
  EXPECT_GE(seen.configurations_pruned, 5);
  EXPECT_GE(seen.too_large, 1);
}

TEST(Search, MemoryPrunedCountsInterleavedConfigurationsNoSplitFits) {
  std::mt19937 rng(31);
  int64_t interleaved_unfit = 0;
  std::string example;
  for (int trial = 0; trial < 20; ++trial) {
    const Job job = brute::random_job(rng, {});
    const SearchResult r = search(job.cluster, job.inputs(), job.space);
    const brute::Result want = brute::brute_force(job);
    interleaved_unfit += want.interleaved_unfit;
    if (r.memory_pruned != want.memory_pruned && example.empty())
      example = (::testing::Message()
                 << "trial " << trial << ": " << r.memory_pruned << " pruned, "
                 << want.memory_pruned << " configurations or classes no split fits, "
                 << want.interleaved_unfit << " of them interleaved")
                    .GetString();
  }
  EXPECT_GT(interleaved_unfit, 0);  // the case arises
  EXPECT_TRUE(example.empty()) << example;
}

TEST(Search, NoFewerMicroBatchesThanPositions) {
  // One row per step: one micro-batch, so one position, and a group of one chip for one row.
  // Two chips of one type have no plan; one chip of each of two types is two plans.
  for (uint32_t seed = 0; seed < 8; ++seed) {
    std::mt19937 rng(seed);
    Job job = brute::random_job(rng, {.min_chips = 2, .max_chips = 2, .memory = int64_t(1) << 30});
    job.space.global_rows = 1;
    job.space.max_stages = 0;
    job.space.max_micro_batch_rows = 0;
    job.space.schedules = SearchSpace{}.schedules;  // 1F1B among them
    const SearchResult r = search(job.cluster, job.inputs(), job.space);
    const bool two_types = job.cluster.chip_types().size() == 2;
    EXPECT_EQ(r.classes, two_types ? 2 : 0);
    ASSERT_EQ(r.best.size(), two_types ? 2u : 0u);
    for (const Candidate& c : r.best) EXPECT_EQ(c.plan.world_size(), 1) << c.plan.str();
  }
}

}  // namespace
}  // namespace h2::parallel::planner
