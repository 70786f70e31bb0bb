// The plan search (parallel/planner/search.h) where memory decides, on hand-built two-chip
// clusters whose usable memory (memory_model.h: the capacity less the model's 5% margin) is set
// from the cost model's own figure for a plan (estimate(), checked against the memory model in
// cost_model_test.cpp) or from the search's documented class memory bound (a block's state and
// one micro-batch's block input per block held): a memory nothing
// fits in leaves no plan and counts every class it rules out; a memory only recomputation fits
// in gives a recomputing plan, and exactly what the plain plan needs gives the plain plan; a
// split that fits without recomputation is preferred to recomputation, with the head counted
// after its position's blocks; memory_pruned counts each configuration no split fits once (not
// once per recomputation try) and nothing memory did not rule out. explain() names the slower
// bottleneck chip of a plan on a chip 10 times slower.
#include <gtest/gtest.h>

#include "parallel/planner/memory_model.h"
#include "parallel/planner/search.h"
#include "tests/parallel/planner/planner_test_model.h"

namespace h2::parallel::planner {
namespace {

using pipeline::ScheduleKind;

using test::Job;
using test::model;

// Two chips of one type on one node, 3 layers, 4 rows per step in micro-batches of 1 row.
// The least capacity whose usable share holds `bytes`.
int64_t capacity_for(int64_t bytes) {
  int64_t c = int64_t(double(bytes) / (1 - kMemoryHeadroom));
  while (usable_bytes(c) < bytes) ++c;
  while (usable_bytes(c - 1) >= bytes) --c;
  return c;
}

Job two_chips(int64_t memory) {
  Job job;
  job.m = model(3);
  job.cluster.chips = {{.name = "chip-a",
                        .count = 2,
                        .memory_bytes = memory,
                        .memory_bandwidth = 1e9,
                        .link_bandwidth = 1e8}};
  job.cluster.nodes = {{"chip-a", 2}};
  job.cluster.intra_node["chip-a"] = {1e8, 1e-5};
  ChipProfile& p = job.profiles.by_chip["chip-a"];
  p.key.chip = "chip-a";
  auto u = [](double f, double b, int64_t stash, int64_t workspace) {
    return UnitCost{.forward_s = f,
                    .backward_s = b,
                    .input_s = b / 2,
                    .weight_s = b / 2,
                    .optimizer_s = 0.001,
                    .stash_bytes = stash,
                    .forward_workspace_bytes = workspace,
                    .workspace_bytes = workspace};
  };
  p.by_rows[1] = {u(0.5, 1.0, 100, 100), u(1.0, 0.2, 1000, 1000), u(0.01, 0.02, 100, 50000)};
  job.space.global_rows = 4;
  job.space.max_micro_batch_rows = 1;
  job.space.schedules = {ScheduleKind::k1F1B};
  job.space.wires = {std::nullopt};
  job.space.threads = 1;
  return job;
}

TEST(SearchMemory, NothingFitsATinyMemory) {
  // 4 KiB holds not one block's state: both classes (2 positions, and 2 replicas of one) are
  // ruled out before any configuration is examined.
  const Job job = two_chips(4096);
  const SearchResult r = search(job.cluster, job.inputs(), job.space);
  EXPECT_TRUE(r.best.empty());
  EXPECT_TRUE(r.too_large.empty());
  EXPECT_EQ(r.classes, 0);
  EXPECT_EQ(r.outer_candidates, 0);
  EXPECT_EQ(r.costed, 0);
  EXPECT_EQ(r.memory_pruned, 2);
}

TEST(SearchMemory, MemoryForcesRecompute) {
  // One chip, 2 layers, one row per step: a single plan, one stage.
  Job job = two_chips(0);
  job.cluster.chips[0].count = 1;
  job.cluster.nodes = {{"chip-a", 1}};
  job.m = model(2);
  job.space.global_rows = 1;
  Plan plan;
  plan.group_sizes = {1}, plan.devices = {"vchip:0"};
  plan.layout = pipeline::StageLayout::from_block_counts({2}, 2);
  const int64_t plain = estimate(plan, job.inputs()).positions[0].peak_bytes;
  plan.recompute = true;
  const int64_t recomputed = estimate(plan, job.inputs()).positions[0].peak_bytes;
  ASSERT_LT(recomputed, plain);
  job.cluster.chips[0].memory_bytes = capacity_for((plain + recomputed) / 2);
  SearchResult r = search(job.cluster, job.inputs(), job.space);
  ASSERT_EQ(r.best.size(), 1u);
  EXPECT_TRUE(r.best[0].plan.recompute);
  // The plain split was ruled out by the search's own memory limit, before any costing; the
  // configuration has a split with recomputation, so memory did not rule it out.
  EXPECT_EQ(r.outer_candidates, 1);
  EXPECT_EQ(r.costed, 1);
  EXPECT_EQ(r.memory_pruned, 0);
  EXPECT_TRUE(r.too_large.empty());
  // Without recomputation in the space, nothing fits: the one configuration is ruled out.
  job.space.recompute = false;
  r = search(job.cluster, job.inputs(), job.space);
  EXPECT_TRUE(r.best.empty());
  EXPECT_EQ(r.outer_candidates, 1);
  EXPECT_EQ(r.costed, 0);
  EXPECT_EQ(r.memory_pruned, 1);
  // With room for the plain plan, no recomputation.
  job.space.recompute = true;
  job.cluster.chips[0].memory_bytes = capacity_for(plain);
  r = search(job.cluster, job.inputs(), job.space);
  ASSERT_EQ(r.best.size(), 1u);
  EXPECT_FALSE(r.best[0].plan.recompute);
  // One byte less, and the plain plan's peak is beyond the usable memory: recomputation.
  job.cluster.chips[0].memory_bytes = capacity_for(plain) - 1;
  r = search(job.cluster, job.inputs(), job.space);
  ASSERT_EQ(r.best.size(), 1u);
  EXPECT_TRUE(r.best[0].plan.recompute);
}

TEST(SearchMemory, TheInnerLevelCountsTheHeadAfterItsBlocks) {
  // Two one-chip positions, 3 layers, 4 micro-batches of 1 row, 1F1B. The embedding is slow and
  // the head's workspace large (50000 bytes against 1000 for a block): the surrogate prefers
  // (1, 2) (c = 2.7, 2.43: f = 5.13 + 3 x 2.7 = 13.23) to (2, 1) (c = 3.9, 1.23: f = 16.83).
  // The chips' usable memory is one byte short of what (1, 2) needs on its head's position: a
  // block's stash and workspace come under the head's 50000 (memory_model.h: the forward reaches
  // the head holding every block's stash; the backward starts at the head holding all of them). (2,
  // 1) fits without recomputation, so the search must return it (recomputation only where nothing
  // fits without it) and not (1, 2) with recomputation, slower: 0.5 + 1 + 2.2 = 3.7 and 0.03 + 2
  // x 2.2 = 4.43 per micro-batch against 3.9 and 1.23. (Plain 1F1B only: a lead holds more.)
  Job job = two_chips(0);
  job.space.leads = {0};
  Plan plan;
  plan.group_sizes = {1, 1}, plan.devices = {"vchip:0", "vchip:1"};
  plan.micro_batches = 4;
  plan.layout = pipeline::StageLayout::from_block_counts({1, 2}, 3);
  const int64_t too_much = estimate(plan, job.inputs()).positions[1].peak_bytes;
  job.cluster.chips[0].memory_bytes = capacity_for(too_much - 1);
  plan.layout = pipeline::StageLayout::from_block_counts({2, 1}, 3);
  const PlanEstimate fitting = estimate(plan, job.inputs());
  ASSERT_TRUE(fitting.fits());
  const SearchResult r = search(job.cluster, job.inputs(), job.space);
  ASSERT_FALSE(r.best.empty());
  // Were the head counted before the blocks, (1, 2) would pass for fitting, be costed, fail
  // estimate() and send the search to recomputation.
  EXPECT_EQ(r.best[0].plan.layout.str(), plan.layout.str());
  EXPECT_FALSE(r.best[0].plan.recompute) << r.best[0].plan.str();
  EXPECT_DOUBLE_EQ(r.best[0].estimate.step_s, fitting.step_s);
  EXPECT_TRUE(r.too_large.empty());
  // Every split the search costed fits: 2 positions, (2, 1) only; 1 position (2 replicas), none.
  EXPECT_EQ(r.costed, 1);
  EXPECT_EQ(r.memory_pruned, 1);
}

TEST(SearchMemory, MemoryPrunedCountsConfigurationsMemoryRuledOut) {
  Job job = two_chips(int64_t(1) << 30);
  job.m = model(6);
  job.space.schedules = {ScheduleKind::k1F1B, ScheduleKind::kGPipe, ScheduleKind::kZBH1,
                         ScheduleKind::kInterleaved1F1B};
  job.space.leads = {0};  // the counts below are of 1F1B without a lead
  // With memory to spare nothing is ruled out by memory, whatever else the space lacks
  // (interleaving 2 positions needs the layers in 2 x 2 equal chunks; 6 do not divide by 4).
  const SearchResult ample = search(job.cluster, job.inputs(), job.space);
  EXPECT_EQ(ample.classes, 2);
  EXPECT_EQ(ample.classes_expanded, 2);
  EXPECT_EQ(ample.outer_candidates, 3 + 1);  // 2 positions x 3 schedules; 2 replicas x 1F1B
  EXPECT_EQ(ample.memory_pruned, 0);
  // The class bound: each block held costs at least its state and a micro-batch's input.
  const int64_t per_block = unit_state_bytes(job.m, UnitKind::block, DType::f32, 1, false) +
                            job.m.activation_bytes_per_row(DType::f32);
  // Room for 3 such blocks per chip: 2 positions may hold 6 layers, 1 may not. Yet no split
  // fits, even with recomputation: the embedding's and the head's state, the transfer buffers
  // and the step's token ids come on top. Each configuration is counted once.
  job.cluster.chips[0].memory_bytes = capacity_for(3 * per_block);
  const SearchResult tight = search(job.cluster, job.inputs(), job.space);
  EXPECT_TRUE(tight.best.empty());
  EXPECT_EQ(tight.classes, 1);
  EXPECT_EQ(tight.classes_expanded, 1);
  EXPECT_EQ(tight.outer_candidates, 3);
  EXPECT_EQ(tight.costed, 0);
  EXPECT_EQ(tight.memory_pruned, 1 + 3);  // the class of 2 replicas, then 3 configurations
  // One byte less and no class is left.
  job.cluster.chips[0].memory_bytes = capacity_for(3 * per_block) - 1;
  const SearchResult none = search(job.cluster, job.inputs(), job.space);
  EXPECT_EQ(none.classes, 0);
  EXPECT_EQ(none.outer_candidates, 0);
  EXPECT_EQ(none.memory_pruned, 2);
}

TEST(SearchMemory, ExplainNamesTheSlowerBottleneck) {
  // Two one-chip types: chip-b runs everything 10 times slower.
  Job job = two_chips(int64_t(1) << 30);
  job.cluster.chips[0].count = 1;
  ChipSpec slow = job.cluster.chips[0];
  slow.name = "chip-b";
  job.cluster.chips.push_back(slow);
  job.cluster.nodes = {{"chip-a", 1}, {"chip-b", 1}};
  job.cluster.cross_type = {{"chip-a", {1e8, 1e-5}}, {"chip-b", {1e8, 1e-5}}};
  ChipProfile b = job.profiles.by_chip.at("chip-a");
  b.key.chip = "chip-b";
  for (auto& [rows, units] : b.by_rows)
    for (UnitCost& u : units) u.forward_s *= 10, u.backward_s *= 10;
  job.profiles.by_chip["chip-b"] = b;
  auto one_chip = [&](int chip) {
    Candidate c;
    c.plan.group_sizes = {1}, c.plan.devices = {"vchip:" + std::to_string(chip)};
    c.plan.layout = pipeline::StageLayout::from_block_counts({3}, 3);
    c.plan.micro_batches = 4;
    c.estimate = estimate(c.plan, job.inputs());
    return c;
  };
  const Candidate fast = one_chip(0), slower = one_chip(1);
  ASSERT_LT(fast.estimate.step_s, slower.estimate.step_s);
  const std::string why = explain(fast, slower, job.inputs());
  EXPECT_NE(why.find("slower bottleneck"), std::string::npos) << why;
  EXPECT_NE(why.find("chip-b"), std::string::npos) << why;
  EXPECT_EQ(explain(fast, fast, job.inputs()).find("slower bottleneck"), std::string::npos);
  // The search ranks the fast chip alone first and explains the slow one the same way.
  const SearchResult r = search(job.cluster, job.inputs(), job.space);
  ASSERT_FALSE(r.best.empty());
  EXPECT_EQ(r.best[0].plan.devices, std::vector<std::string>{"vchip:0"});
  int slow_alone = 0;
  for (const Candidate& c : r.best) {
    if (c.plan.devices != std::vector<std::string>{"vchip:1"}) continue;
    ++slow_alone;
    EXPECT_NE(explain(r.best[0], c, job.inputs()).find("slower bottleneck (chip-b"),
              std::string::npos);
  }
  EXPECT_EQ(slow_alone, 1);
}

}  // namespace
}  // namespace h2::parallel::planner
