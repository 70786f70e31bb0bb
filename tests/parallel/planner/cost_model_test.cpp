// The cost model (parallel/planner/cost_model.h) on plans whose step time has a closed form,
// derived by hand from docs/planner.md with profiles and clusters built in the test:
//   - one stage on one chip: upload + m (F + B) + optimizer (recompute adds the blocks' forward);
//   - two equal stages on two chip types: GPipe (m + 1)(f + b + 2h) + 2x, 1F1B with 4 micro-batches
//     5(f + b + 2h) + 4x (h: a staging copy over the host link, x: the flight over the slower
//     cross-type link), for the compute, BF16 and FP8 wires;
//   - replicas: the ring all-reduce 2(R - 1)(latency + G / R / bandwidth) plus staging, exposed
//     only beyond the stage's backward;
//   - a group of two: the FSDP gather and reduce-scatter, or the replicated all-reduce, around
//     the micro-batches, and the optimizer divided by the group under FSDP.
// Every rank's predicted memory is checked against the memory model's terms (memory_model.h),
// its activation peak worked out by hand from the stage figures for the schedule's order; a plan
// fits when every peak is within its chip's usable memory (the capacity less the 5% margin).
#include "parallel/planner/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "parallel/planner/memory_model.h"
#include "tests/parallel/planner/planner_test_model.h"

namespace h2::parallel::planner {
namespace {

constexpr double kTol = 1e-12;

using test::model;

UnitCost unit(double f, double b, double opt, int64_t stash) {
  return {.forward_s = f,
          .backward_s = b,
          .input_s = 0.6 * b,
          .weight_s = 0.4 * b,
          .optimizer_s = opt,
          .stash_bytes = stash,
          .forward_workspace_bytes = stash / 2,
          .workspace_bytes = 3 * stash,
          .deferred_bytes = stash / 4};
}

ChipSpec chip(const std::string& name, int count, double host_bandwidth, double time_scale) {
  return {.name = name,
          .count = count,
          .memory_bytes = int64_t(1) << 30,
          .memory_bandwidth = 1e9,
          .link_bandwidth = host_bandwidth,
          .time_scale = time_scale};
}

Plan plan_of(std::vector<int> groups, int replicas, std::vector<int> blocks, int layers,
             pipeline::ScheduleKind schedule, int micro_batches, int64_t rows) {
  Plan p;
  p.group_sizes = std::move(groups);
  p.replicas = replicas;
  for (int r = 0; r < p.world_size(); ++r) p.devices.push_back("vchip:" + std::to_string(r));
  p.layout = pipeline::StageLayout::from_block_counts(blocks, layers);
  p.schedule = schedule;
  p.micro_batches = micro_batches;
  p.micro_batch_rows = rows;
  return p;
}

// The stage figures of a list of unit costs (kinds: embedding first, head last when named).
StageActivations stage_of(const std::vector<UnitCost>& units, const std::vector<UnitKind>& kinds,
                          bool recompute, int64_t rows, const ModelShape& m) {
  return stage_activations(units, kinds, recompute, rows * m.activation_bytes_per_row(DType::f32));
}

struct OneChip {
  ModelShape m = model(3, false);
  Cluster cluster;
  Profiles profiles;
  OneChip() {
    // Host link 1e6 B/s at chip scale 2 and cluster scale 1.5: 1e6 / 3 effective.
    cluster.chips = {chip("chip-a", 1, 1e6, 2)};
    cluster.nodes = {{"chip-a", 1}};
    cluster.time_scale = 1.5;
    ChipProfile& p = profiles.by_chip["chip-a"];
    p.key.chip = "chip-a";
    p.by_rows[2] = {unit(0.01, 0.02, 0.003, 1000), unit(0.1, 0.25, 0.004, 4000),
                    unit(0.03, 0.05, 0.002, 3000)};
  }
  CostInputs inputs() const { return {&cluster, m, DType::f32, &profiles}; }
};

TEST(CostModel, OneStageOnOneChip) {
  OneChip c;
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "no recompute");
    Plan plan = plan_of({1}, 1, {3}, 3, pipeline::ScheduleKind::k1F1B, 4, 2);
    plan.recompute = recompute;
    const PlanEstimate e = estimate(plan, c.inputs());
    // F = 0.01 + 3 x 0.1 + 0.03 = 0.34; B = 0.02 + 3 x 0.25 + 0.05 = 0.82 (+ 3 x 0.1 recompute).
    const double F = 0.34, B = 0.82 + (recompute ? 0.3 : 0);
    // Upload: 4 micro-batches x 2 x 4 bytes x 2 rows x 8 tokens = 512 bytes at 1e6 / 3 B/s.
    const double upload = 512.0 * 3 / 1e6;
    const double optimizer = 0.003 + 3 * 0.004 + 0.002;
    EXPECT_NEAR(e.upload_s, upload, kTol);
    EXPECT_NEAR(e.pipeline_s, 4 * (F + B), kTol);
    EXPECT_NEAR(e.tail_s, optimizer, kTol);
    EXPECT_NEAR(e.step_s, upload + 4 * (F + B) + optimizer, kTol);
    EXPECT_NEAR(e.bubble, 0, kTol);
    EXPECT_NEAR(e.comm_s, 0, kTol);
    ASSERT_EQ(e.positions.size(), 1u);
    EXPECT_NEAR(e.positions[0].busy_s, 4 * (F + B), kTol);
    EXPECT_NEAR(e.tokens_per_s(plan, c.m), 4 * 2 * 8 / e.step_s, 1e-9);
    // Memory: the units' state, the stage's larger compute peak (1F1B on one stage holds nothing
    // else when an F or B starts), the token ids; no transfer buffers.
    const ChipProfile& p = c.profiles.by_chip.at("chip-a");
    const auto& u = p.by_rows.at(2);
    const StageActivations s = stage_of(
        {u[0], u[1], u[1], u[1], u[2]},
        {UnitKind::embedding, UnitKind::block, UnitKind::block, UnitKind::block, UnitKind::head},
        recompute, 2, c.m);
    const int64_t state = unit_state_bytes(c.m, UnitKind::embedding, DType::f32, 1, false) +
                          3 * unit_state_bytes(c.m, UnitKind::block, DType::f32, 1, false) +
                          unit_state_bytes(c.m, UnitKind::head, DType::f32, 1, false);
    EXPECT_EQ(e.positions[0].peak_bytes,
              state + std::max(s.forward_peak, s.backward_peak) + token_bytes(c.m, 2, 4));
    EXPECT_TRUE(e.fits());
  }
}

TEST(CostModel, FitsWithinTheUsableMemoryAndNamesTheGroup) {
  OneChip c;
  const Plan plan = plan_of({1}, 1, {3}, 3, pipeline::ScheduleKind::k1F1B, 4, 2);
  const int64_t need = estimate(plan, c.inputs()).positions[0].peak_bytes;
  // The usable share: the capacity less the memory model's margin, rounded down.
  EXPECT_EQ(usable_bytes(1000000), 950000);
  EXPECT_EQ(usable_bytes(1000001), 950000);
  EXPECT_EQ(usable_bytes(20), 19);
  // The least capacity whose usable share holds the peak fits; one byte less does not; the
  // peak's own size does not either, the margin being kept free.
  int64_t capacity = need;
  while (usable_bytes(capacity) < need) ++capacity;
  ASSERT_GT(capacity, need);
  c.cluster.chips[0].memory_bytes = capacity;
  EXPECT_TRUE(estimate(plan, c.inputs()).fits());
  EXPECT_EQ(estimate(plan, c.inputs()).memory_problem(), "");
  for (int64_t less : {capacity - 1, need}) {
    c.cluster.chips[0].memory_bytes = less;
    const PlanEstimate e = estimate(plan, c.inputs());
    EXPECT_FALSE(e.fits()) << less;
    EXPECT_EQ(e.memory_problem().rfind("group 0 (chip-a)", 0), 0u) << e.memory_problem();
    EXPECT_NE(e.memory_problem().find("95% of it usable"), std::string::npos) << e.memory_problem();
  }
}

// Two chip types, one chip each on its own node, with equal profiles and equal effective host
// links (4e6 B/s at scale 2 and 2e6 at scale 1, then the cluster's 1.5): h = bytes x 1.5 / 2e6.
// Cross-type links: a (1e6 B/s, 2 ms), b (5e5 B/s, 1 ms) -> the slower: 5e5 B/s and 2 ms, scaled:
// x = 3 ms + bytes x 1.5 / 5e5.
struct TwoTypes {
  ModelShape m = model(4, true);
  Cluster cluster;
  Profiles profiles;
  TwoTypes() {
    cluster.chips = {chip("chip-a", 1, 4e6, 2), chip("chip-b", 1, 2e6, 1)};
    cluster.nodes = {{"chip-a", 1}, {"chip-b", 1}};
    cluster.cross_type = {{"chip-a", {1e6, 2e-3}}, {"chip-b", {5e5, 1e-3}}};
    cluster.time_scale = 1.5;
    for (const char* name : {"chip-a", "chip-b"}) {
      ChipProfile& p = profiles.by_chip[name];
      p.key.chip = name;
      // Embedding and head cost the same, so emb + 2 blocks and 2 blocks + head are equal:
      // f = 0.02 + 0.2 = 0.22, b = 0.03 + 0.4 = 0.43.
      p.by_rows[2] = {unit(0.02, 0.03, 0.001, 1000), unit(0.1, 0.2, 0.005, 4000),
                      unit(0.02, 0.03, 0.002, 3000)};
    }
  }
  CostInputs inputs() const { return {&cluster, m, DType::f32, &profiles}; }

  // Memory of position q: its units' state (the head's position also holds the tied table),
  // `held` stashes beyond the running action's peak, transfer buffers and token ids.
  int64_t memory(int q, int held, std::optional<DType> wire, int micro_batches) const {
    const auto& u = profiles.by_chip.at(q == 0 ? "chip-a" : "chip-b").by_rows.at(2);
    const StageActivations s =
        q == 0 ? stage_of({u[0], u[1], u[1]},
                          {UnitKind::embedding, UnitKind::block, UnitKind::block}, false, 2, m)
               : stage_of({u[1], u[1], u[2]}, {UnitKind::block, UnitKind::block, UnitKind::head},
                          false, 2, m);
    int64_t state = 2 * unit_state_bytes(m, UnitKind::block, DType::f32, 1, false);
    state += q == 0 ? unit_state_bytes(m, UnitKind::embedding, DType::f32, 1, false)
                    : unit_state_bytes(m, UnitKind::head, DType::f32, 1, false) +
                          unit_state_bytes(m, UnitKind::embedding, DType::f32, 1, false);
    return state + held * s.stash + std::max(s.forward_peak, s.backward_peak) +
           transfer_bytes(m, 2, DType::f32, wire, true) + token_bytes(m, 2, micro_batches);
  }
};

// Bytes of one micro-batch (2 rows) on the wire: T x C = 128 elements per row, + 4 bytes of
// scale per token for FP8.
double wire_bytes(std::optional<DType> wire) {
  if (!wire) return 2 * 128 * 4.0;
  if (*wire == DType::bf16) return 2 * 128 * 2.0;
  return 2 * (128 * 1.0 + 4 * 8);
}

TEST(CostModel, TwoEqualStagesGPipe) {
  const TwoTypes c;
  for (std::optional<DType> wire : {std::optional<DType>{}, std::optional<DType>{DType::bf16},
                                    std::optional<DType>{DType::f8e4m3}}) {
    SCOPED_TRACE(wire ? dtype_name(*wire) : "compute wire");
    const int m = 3;
    Plan plan = plan_of({1, 1}, 1, {2, 2}, 4, pipeline::ScheduleKind::kGPipe, m, 2);
    plan.wire_dtype = wire;
    const PlanEstimate e = estimate(plan, c.inputs());
    const double bytes = wire_bytes(wire);
    const double h = bytes * 1.5 / 2e6, x = 3e-3 + bytes * 1.5 / 5e5;
    const double f = 0.22, b = 0.43;
    // Rank 1's i-th forward ends at (i + 2)(f + h) + x (receive staging + forward each period);
    // its backwards, each followed by its send staging, start after the last one; rank 0's
    // backward j (receive staging + backward) waits for rank 1's send j plus x:
    //   makespan = (m + 1)(f + h) + (m + 1)(b + h) + 2x = (m + p - 1)(f + b + 2h) + 2(p - 1) x.
    EXPECT_NEAR(e.pipeline_s, (m + 1) * (f + b + 2 * h) + 2 * x, kTol);
    // Upload: 3 x 2 x 4 x 2 x 8 = 384 bytes on either chip's host link.
    const double upload = 384 * 1.5 / 2e6;
    const double tail = std::max(0.001 + 2 * 0.005, 2 * 0.005 + 0.002);
    EXPECT_NEAR(e.upload_s, upload, kTol);
    EXPECT_NEAR(e.tail_s, tail, kTol);
    EXPECT_NEAR(e.step_s, upload + (m + 1) * (f + b + 2 * h) + 2 * x + tail, kTol);
    // Each rank stages every micro-batch once each way; its compute is m (f + b).
    EXPECT_NEAR(e.comm_s, 2 * m * h, kTol);
    ASSERT_EQ(e.positions.size(), 2u);
    EXPECT_EQ(e.positions[0].chip, "chip-a");
    EXPECT_EQ(e.positions[1].chip, "chip-b");
    for (int q = 0; q < 2; ++q) {
      EXPECT_NEAR(e.positions[size_t(q)].busy_s, m * (f + b), kTol);
      // GPipe: the last forward and the first backward run with m - 1 other stashes held.
      EXPECT_EQ(e.positions[size_t(q)].peak_bytes, c.memory(q, m - 1, wire, m)) << q;
    }
  }
}

TEST(CostModel, TwoEqualStages1F1B) {
  const TwoTypes c;
  const int m = 4;
  const Plan plan = plan_of({1, 1}, 1, {2, 2}, 4, pipeline::ScheduleKind::k1F1B, m, 2);
  const PlanEstimate e = estimate(plan, c.inputs());
  const double bytes = wire_bytes(std::nullopt);
  const double h = bytes * 1.5 / 2e6, x = 3e-3 + bytes * 1.5 / 5e5;
  const double u = 0.22 + h, v = 0.43 + h;  // per micro-batch and direction, on either rank
  // Rank 0: F0 F1 B0 F2 B1 F3 B2 B3 (each F followed by its send, each B preceded by its
  // receive); rank 1: F0 B0 F1 B1 ... Walking both (ends):
  //   rank 0  F1 2u | B0 2u+2x+2v | F2 3u+2x+2v | B1 3u+2x+3v | F3 4u+2x+3v | B2 4u+4x+4v
  //   rank 1  F0 2u+x, B0 2u+x+v | F1 3u+x+v ... | F2 (waits for F2's flight) 4u+3x+2v,
  //           B2 4u+3x+3v | F3 5u+3x+3v, B3 5u+3x+4v
  //   rank 0  B3 = max(4u+4x+4v, 5u+3x+4v + x) + v = 5u+4x+5v
  // so every second micro-batch round trip exposes 2x: makespan (m + 1)(u + v) + 4x.
  EXPECT_NEAR(e.pipeline_s, 5 * (u + v) + 4 * x, kTol);
  const double upload = 4 * 2 * 4 * 2 * 8 * 1.5 / 2e6;
  EXPECT_NEAR(e.step_s, upload + 5 * (u + v) + 4 * x + 2 * 0.005 + 0.002, kTol);
  // 1F1B: rank 0 holds one more stash when it starts B0 or F1, rank 1 none.
  EXPECT_EQ(e.positions[0].peak_bytes, c.memory(0, 1, std::nullopt, m));
  EXPECT_EQ(e.positions[1].peak_bytes, c.memory(1, 0, std::nullopt, m));
  // The idle share of 2 ranks x makespan.
  EXPECT_NEAR(e.bubble, 1 - 2 * m * (0.22 + 0.43 + 2 * h) / (2 * e.pipeline_s), 1e-12);
}

// Two chips of one type on one node: link 1e6 B/s, 1 ms, at cluster scale 1.5.
struct OneNodeOfTwo {
  ModelShape m = model(3, false);
  Cluster cluster;
  Profiles profiles;
  explicit OneNodeOfTwo(double block_backward) {
    cluster.chips = {chip("chip-a", 2, 1e6, 2)};  // host link 1e6 / 3 effective
    cluster.nodes = {{"chip-a", 2}};
    cluster.intra_node = {{"chip-a", {1e6, 1e-3}}};
    cluster.time_scale = 1.5;
    ChipProfile& p = profiles.by_chip["chip-a"];
    p.key.chip = "chip-a";
    p.by_rows[2] = {unit(0.01, 0.02, 0.003, 1000), unit(0.1, block_backward, 0.004, 4000),
                    unit(0.03, 0.05, 0.002, 3000)};
  }
  CostInputs inputs() const { return {&cluster, m, DType::f32, &profiles}; }
};

// Parameters of the whole model: 1024 + 3 x 2592 + 1040 = 9840.
constexpr double kParams = 9840;
constexpr double kHostS = 3 / 1e6;                // s per byte over the host link
constexpr double kLat = 1.5e-3, kBw = 1e6 / 1.5;  // the node's link, scaled

TEST(CostModel, ReplicasAllReduceBeyondTheLastBackward) {
  // G = 4 x 9840 bytes of gradients; R = 2:
  //   reduce = 2 (R - 1)(latency + G / R / bandwidth) + staging 2G = 0.06204 + 0.23616 = 0.2982
  const double G = 4 * kParams;
  const double reduce = 2 * (kLat + G / 2 / kBw) + 2 * G * kHostS;
  ASSERT_NEAR(reduce, 0.2982, 1e-12);
  const double optimizer = 0.003 + 3 * 0.004 + 0.002;
  const double upload = 2 * 2 * 4 * 2 * 8 * kHostS;
  // Block backward 0.02: the stage's backward 0.02 + 0.06 + 0.05 = 0.13 hides 0.13 of it.
  // Block backward 0.2: 0.67 hides all of it.
  for (double block_backward : {0.02, 0.2}) {
    const OneNodeOfTwo c(block_backward);
    const double F = 0.34, B = 0.07 + 3 * block_backward;
    const Plan plan = plan_of({1}, 2, {3}, 3, pipeline::ScheduleKind::k1F1B, 2, 2);
    const PlanEstimate e = estimate(plan, c.inputs());
    const double exposed = std::max(0.0, reduce - B);
    EXPECT_NEAR(e.pipeline_s, 2 * (F + B), kTol);
    EXPECT_NEAR(e.tail_s, optimizer + exposed, kTol);
    EXPECT_NEAR(e.step_s, upload + 2 * (F + B) + optimizer + exposed, kTol);
    EXPECT_NEAR(e.comm_s, reduce, kTol);
    // Two replicas of 2 micro-batches of 2 rows of 8 tokens per step.
    EXPECT_NEAR(e.tokens_per_s(plan, c.m), 2 * 2 * 2 * 8 / e.step_s, 1e-9);
  }
}

TEST(CostModel, AGroupOfTwoGathersAndReduces) {
  const OneNodeOfTwo c(0.25);
  // 4 rows per micro-batch, 2 per rank (the profile's measured size), 3 micro-batches.
  const double F = 0.34, B = 0.82;
  const double P = kParams, upload = 3 * 2 * 4 * 4 * 8 * kHostS;
  const double optimizer = 0.003 + 3 * 0.004 + 0.002;
  // FSDP without overlap: UNSHARD = (g - 1)(latency + 4P / g / bandwidth) + staging of 4P +
  // 4P / g (f32 copy), REDUCE_GRAD the same for the f32 gradients; the optimizer runs on half the
  // parameters.
  Plan plan = plan_of({2}, 1, {3}, 3, pipeline::ScheduleKind::k1F1B, 3, 4);
  plan.fsdp = true;
  plan.overlap = false;
  const double gather = (kLat + 4 * P / 2 / kBw) + (4 * P + 2 * P) * kHostS;
  PlanEstimate e = estimate(plan, c.inputs());
  EXPECT_NEAR(e.pipeline_s, gather + 3 * (F + B) + gather, kTol);
  EXPECT_NEAR(e.step_s, upload + 2 * gather + 3 * (F + B) + optimizer / 2, kTol);
  EXPECT_NEAR(e.comm_s, 2 * gather, kTol);
  // With overlap the units' gathers (each the formula above for its own parameters) arrive one
  // after another and unit i's forward starts once its gather and unit i - 1 are done: UNSHARD
  // costs the forward's delay, here by hand for embedding, 3 blocks, head.
  {
    const auto& units = c.profiles.by_chip.at("chip-a").by_rows.at(2);
    const double params[5] = {double(c.m.embedding_parameters()), double(c.m.block_parameters()),
                              double(c.m.block_parameters()), double(c.m.block_parameters()),
                              double(c.m.head_parameters())};
    const double forward[5] = {units[0].forward_s, units[1].forward_s, units[1].forward_s,
                               units[1].forward_s, units[2].forward_s};
    double arrived = 0, done = 0, busy = 0;
    for (int i = 0; i < 5; ++i) {
      arrived += (kLat + 4 * params[i] / 2 / kBw) + (4 * params[i] + 2 * params[i]) * kHostS;
      done = std::max(done, arrived) + forward[i];
      busy += forward[i];
    }
    const double prefetched = done - busy;
    ASSERT_GT(prefetched, 0);
    ASSERT_LT(prefetched, gather);  // the forward hides part of it
    // The last backward posts unit i's reduction (f32 gradients, the formula above) when its
    // backward ends, last unit first; REDUCE_GRAD waits for the last to arrive after the
    // backward's end.
    double computed = 0, link_free = 0;
    for (int i = 4; i >= 0; --i) {
      const int kind = i == 0 ? 0 : i == 4 ? 2 : 1;
      computed += units[size_t(kind)].backward_s;
      link_free = std::max(link_free, computed) + (kLat + 4 * params[i] / 2 / kBw) +
                  (4 * params[i] + 2 * params[i]) * kHostS;
    }
    const double behind_backward = link_free - computed;
    ASSERT_GT(behind_backward, 0);
    ASSERT_LT(behind_backward, gather);  // the backward hides part of it
    plan.overlap = true;
    const PlanEstimate o = estimate(plan, c.inputs());
    EXPECT_NEAR(o.pipeline_s, prefetched + 3 * (F + B) + behind_backward, kTol);
    EXPECT_NEAR(o.comm_s, prefetched + behind_backward, kTol);
    plan.overlap = false;
  }
  ASSERT_EQ(e.positions.size(), 1u);
  EXPECT_EQ(e.positions[0].ranks, 2);
  const auto& u = c.profiles.by_chip.at("chip-a").by_rows.at(2);
  const StageActivations s = stage_of(
      {u[0], u[1], u[1], u[1], u[2]},
      {UnitKind::embedding, UnitKind::block, UnitKind::block, UnitKind::block, UnitKind::head},
      false, 2, c.m);
  auto state = [&](bool fsdp) {
    return unit_state_bytes(c.m, UnitKind::embedding, DType::f32, 2, fsdp) +
           3 * unit_state_bytes(c.m, UnitKind::block, DType::f32, 2, fsdp) +
           unit_state_bytes(c.m, UnitKind::head, DType::f32, 2, fsdp);
  };
  const int64_t activations = std::max(s.forward_peak, s.backward_peak);
  EXPECT_EQ(e.positions[0].peak_bytes, state(true) + activations + token_bytes(c.m, 4, 3));
  // Replicated group: one all-reduce, 2(g - 1)(latency + 4P / g / bandwidth) + staging 2 x 4P.
  plan.fsdp = false;
  const double all_reduce = 2 * (kLat + 4 * P / 2 / kBw) + 8 * P * kHostS;
  e = estimate(plan, c.inputs());
  EXPECT_NEAR(e.pipeline_s, 3 * (F + B) + all_reduce, kTol);
  EXPECT_NEAR(e.step_s, upload + 3 * (F + B) + all_reduce + optimizer, kTol);
  EXPECT_EQ(e.positions[0].peak_bytes, state(false) + activations + token_bytes(c.m, 4, 3));
}

}  // namespace
}  // namespace h2::parallel::planner
