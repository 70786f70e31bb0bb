// A plan's simulated step (parallel/sim/plan_step.h) against hand-worked values and, where no two
// transfers share a port, against the cost model, whose figures its own tests derive by hand
// (tests/parallel/planner/cost_model_test.cpp). Profiles and clusters are built here:
//   model: 3 blocks, T x C = 8 x 16; parameters 1024 + 3 x 2592 + 1040 = 9840 (f32);
//   per rank at 2 rows: embedding F 0.01 B 0.02, block F 0.1 B b, head F 0.03 B 0.05; AdamW
//   0.003, 0.004, 0.002 per unit; so F = 0.34, B = 0.07 + 3 b;
//   two chips on one node, link W = 1e6 / 1.5 B/s and latency 1.5 ms (cluster time scale 1.5),
//   host links 1e6 / 3 B/s (chip time scale 2).
// Every rank's compute, staging, exposed communication and idle time add up to the step.
#include "parallel/sim/plan_step.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace h2::parallel::sim {
namespace {

using planner::UnitCost;

constexpr double kTol = 1e-9;
constexpr double kParams = 9840;
constexpr double kHostS = 3 / 1e6;  // s per byte over the host link
constexpr double kLat = 1.5e-3;
constexpr double kOptimizer = 0.003 + 3 * 0.004 + 0.002;

UnitCost unit(double f, double b, double opt) {
  return {.forward_s = f,
          .backward_s = b,
          .input_s = 0.6 * b,
          .weight_s = 0.4 * b,
          .optimizer_s = opt,
          .stash_bytes = 1000};
}

struct Job {
  planner::ModelShape m{.vocab_size = 64,
                        .dim = 16,
                        .n_layers = 3,
                        .n_heads = 2,
                        .n_kv_heads = 2,
                        .ffn_dim = 32,
                        .seq_len = 8};
  Cluster cluster;
  planner::Profiles profiles;
  double bandwidth;  // the node's link, scaled
  Job(double block_backward, double link_bandwidth) : bandwidth(link_bandwidth / 1.5) {
    cluster.chips = {ChipSpec{.name = "chip-a",
                              .count = 2,
                              .memory_bytes = int64_t(1) << 30,
                              .memory_bandwidth = 1e9,
                              .link_bandwidth = 1e6,
                              .time_scale = 2}};
    cluster.nodes = {{"chip-a", 2}};
    cluster.intra_node = {{"chip-a", {link_bandwidth, 1e-3}}};
    cluster.time_scale = 1.5;
    planner::ChipProfile& p = profiles.by_chip["chip-a"];
    p.key.chip = "chip-a";
    p.by_rows[2] = {unit(0.01, 0.02, 0.003), unit(0.1, block_backward, 0.004),
                    unit(0.03, 0.05, 0.002)};
  }
  planner::CostInputs inputs() const { return {&cluster, m, DType::f32, &profiles}; }
};

Plan plan_of(std::vector<int> groups, int replicas, int micro_batches, int64_t rows) {
  Plan p;
  p.group_sizes = std::move(groups);
  p.replicas = replicas;
  for (int r = 0; r < p.world_size(); ++r) p.devices.push_back("vchip:" + std::to_string(r));
  p.layout = pipeline::StageLayout::from_block_counts({3}, 3);
  p.schedule = pipeline::ScheduleKind::k1F1B;
  p.micro_batches = micro_batches;
  p.micro_batch_rows = rows;
  return p;
}

void expect_parts_add_up(const PlanSimulation& sim) {
  for (const RankTime& r : sim.ranks) {
    EXPECT_NEAR(r.compute_s + r.staging_s + r.exposed_s + r.idle_s, sim.step_s, kTol) << r.rank;
    EXPECT_GE(r.exposed_s, 0);
    EXPECT_GE(r.idle_s, -kTol);
  }
}

TEST(PlanStep, OneChipIsItsUploadComputeAndOptimizer) {
  const Job job(0.25, 1e6);
  const Plan plan = plan_of({1}, 1, 4, 2);
  const PlanSimulation sim = simulate_plan(plan, job.inputs());
  const double F = 0.34, B = 0.82;
  // Upload: 4 micro-batches x 2 arrays x 4 bytes x 2 rows x 8 tokens = 512 bytes.
  const double upload = 512 * kHostS;
  EXPECT_NEAR(sim.step_s, upload + 4 * (F + B) + kOptimizer, kTol);
  ASSERT_EQ(sim.ranks.size(), 1u);
  EXPECT_NEAR(sim.ranks[0].compute_s, 4 * (F + B) + kOptimizer, kTol);
  EXPECT_NEAR(sim.ranks[0].staging_s, upload, kTol);
  EXPECT_NEAR(sim.ranks[0].exposed_s, 0, kTol);
  EXPECT_NEAR(sim.ranks[0].idle_s, 0, kTol);
  EXPECT_EQ(sim.peak_bytes[0], planner::estimate(plan, job.inputs()).positions[0].peak_bytes);
}

// FSDP over a group of two (3 micro-batches of 4 rows, 2 per rank, b = 0.25): overlap off
// gathers the f32 parameters before the first forward and reduces the gradients after the last
// backward, each exposing latency + 4P / 2 / W of transfer after its staging; overlap on runs
// them unit by unit behind compute. Either way the step is the cost model's, whose values
// cost_model_test.cpp works out by hand.
TEST(PlanStep, FsdpExchangesInTheGroupGiveTheCostModelsStep) {
  const Job job(0.25, 1e6);
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    Plan plan = plan_of({2}, 1, 3, 4);
    plan.fsdp = true;
    plan.overlap = overlap;
    const PlanSimulation sim = simulate_plan(plan, job.inputs());
    const planner::PlanEstimate e = planner::estimate(plan, job.inputs());
    EXPECT_NEAR(sim.step_s, e.step_s, kTol);
    expect_parts_add_up(sim);
    const double exchange = kLat + 4 * kParams / 2 / job.bandwidth;
    for (const RankTime& r : sim.ranks) {
      EXPECT_NEAR(r.compute_s, 3 * (0.34 + 0.82) + kOptimizer / 2, kTol);
      if (overlap) {
        EXPECT_LT(r.exposed_s, 2 * exchange);
      } else {
        EXPECT_NEAR(r.exposed_s, 2 * exchange, kTol);
      }
    }
  }
}

// The same group on device-direct chips (a vendor library moves device memory): no host
// staging around the gathers and reductions, in the cost model and the simulator alike; only
// the token upload is staged (3 x 2 x 4 bytes x 4 rows x 8 tokens).
TEST(PlanStep, DeviceDirectGroupsStageNothing) {
  Job job(0.25, 1e6);
  job.cluster.chips[0].device_direct = true;
  for (bool overlap : {false, true}) {
    Plan plan = plan_of({2}, 1, 3, 4);
    plan.fsdp = true;
    plan.overlap = overlap;
    const PlanSimulation sim = simulate_plan(plan, job.inputs());
    EXPECT_NEAR(sim.step_s, planner::estimate(plan, job.inputs()).step_s, kTol) << overlap;
    for (const RankTime& r : sim.ranks) EXPECT_NEAR(r.staging_s, 768 * kHostS, kTol) << overlap;
    expect_parts_add_up(sim);
  }
}

// Two replicas of one stage (2 micro-batches of 2 rows): each ring of G = 4P bytes starts when
// the last backward starts and its staging (2G over the host link) is done, so the step is
// upload + (m - 1)(F + B) + F + max(B, staging + ring) + optimizer, with the ring
// 2 (R - 1)(latency + G / R / W). Block backward 0.02 (B = 0.13) on a 2e5 B/s link shows the
// ring; 0.2 (B = 0.67) on 1e6 B/s hides it. The cost model charges the same.
TEST(PlanStep, ReplicasRingBehindTheLastBackward) {
  for (auto [b, link] : {std::pair{0.02, 2e5}, std::pair{0.2, 1e6}}) {
    const Job job(b, link);
    const Plan plan = plan_of({1}, 2, 2, 2);
    const PlanSimulation sim = simulate_plan(plan, job.inputs());
    const double F = 0.34, B = 0.07 + 3 * b, G = 4 * kParams;
    const double ring = 2 * (kLat + G / 2 / job.bandwidth) + 2 * G * kHostS;
    const double upload = 2 * 2 * 4 * 2 * 8 * kHostS;
    EXPECT_NEAR(sim.step_s, upload + F + B + F + std::max(B, ring) + kOptimizer, kTol) << b;
    EXPECT_NEAR(sim.step_s, planner::estimate(plan, job.inputs()).step_s, kTol) << b;
    expect_parts_add_up(sim);
    if (ring > B) {
      EXPECT_GT(sim.ranks[0].exposed_s, 0.1);
    }
  }
}

TEST(PlanStep, TheTraceHoldsTheAskedRanksActions) {
  const Job job(0.25, 1e6);
  Plan plan = plan_of({1}, 2, 2, 2);
  const PlanSimulation sim = simulate_plan(plan, job.inputs());
  const nlohmann::json trace = nlohmann::json::parse(simulation_trace_json(sim, {1}));
  std::multiset<std::string> names;
  for (const auto& e : trace.at("traceEvents")) {
    EXPECT_EQ(e.at("pid").get<int>(), 1);
    if (e.at("ph") == "X") names.insert(e.at("name").get<std::string>());
  }
  // 1F1B over two micro-batches on one stage, the upload, the optimizer, and the ring stream
  // rank 1 receives from rank 0.
  for (const char* name : {"F0.0", "F0.1", "B0.0", "B0.1", "upload", "optimizer"})
    EXPECT_EQ(names.count(name), 1u) << name;
  EXPECT_EQ(names.count("replica all-reduce"), 1u);
  EXPECT_THROW(simulation_trace_json(sim, {2}), Error);
}

}  // namespace
}  // namespace h2::parallel::sim
