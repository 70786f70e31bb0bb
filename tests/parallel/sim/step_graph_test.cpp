// A plan's step with replicas: the pipeline, and each stage's gradient all-reduce over the
// replicas (a pipelined ring: uncontended, 2 (R - 1)(latency + bytes / R / bandwidth)) from the
// start of that stage's last backward (its buckets leave while it runs), then the optimizer.
// Analytic cases on one node (W = 100 GB/s, latency 1 us, no port shared by two ring steps):
// - one stage, R replicas, F = 1, B = 2: the last backward starts at (m - 1)(F + B) + F, so the
//   step is max(m (F + B), (m - 1)(F + B) + F + ring) + optimizer: the ring hides behind B up to
//   B and shows beyond;
// - two stages, two replicas, 1F1B with m = 2: the last stage's last backward runs from 5 s to
//   7 s, the first stage's from 7 s to 9 s (plus one 1 us transfer latency per hop), each
//   stage's reduction starts with its backward, and each chip's optimizer waits for its own.
#include "parallel/sim/step_graph.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "sim_fixtures.h"

namespace h2::parallel::sim {
namespace {

using pipeline::ActionKind;

constexpr double W = 100e9, kLatency = 1e-6;

double ring(int replicas, double bytes) {
  return 2 * (replicas - 1) * (kLatency + bytes / replicas / W);
}

TEST(StepGraph, ReplicasReduceBehindTheLastBackwardThenStep) {
  const int m = 4;
  const pipeline::Schedule lowered = pipeline::lower(pipeline::one_f_one_b(1, m));
  const pipeline::Durations d(1);  // F 1, B 2
  for (int R : {1, 2, 4})
    for (double G : {8e9, 400e9}) {  // a ring shorter than B (0.08 s at R = 2), one longer
      const Cluster c = testing::one_node(R);
      const Topology topo(c);
      StepSpec spec{.schedule = &lowered, .durations = &d, .rows = 4};
      for (int r = 0; r < R; ++r) spec.replicas.push_back({{r}});
      spec.bytes = [](int, ActionKind) { return 0.0; };
      spec.replica_bytes = [&](int) { return G; };
      spec.optimizer_s = [](int) { return 0.5; };
      const StepGraph step = step_graph(spec, topo);
      const double reduced = R == 1 ? 0 : (m - 1) * 3.0 + 1.0 + ring(R, G);
      EXPECT_NEAR(simulate(step.graph, topo).makespan, std::max(m * 3.0, reduced) + 0.5, 1e-9)
          << R << " " << G;
    }
}

TEST(StepGraph, TheLastStagesReductionOverlapsTheFirstStagesBackward) {
  Cluster c = testing::one_node(4);
  const Topology topo(c);
  const pipeline::Schedule lowered = pipeline::lower(pipeline::one_f_one_b(2, 2));
  const pipeline::Durations d(2);
  // Replica 0 on chips 0 (stage 0) and 1 (stage 1), replica 1 on chips 2 and 3. Transfers
  // between stages carry nothing (1 us of latency each).
  StepSpec spec{.schedule = &lowered, .durations = &d, .replicas = {{{0}, {1}}, {{2}, {3}}}};
  spec.bytes = [](int, ActionKind) { return 0.0; };
  const double G0 = 1e9, G1 = 300e9;
  spec.replica_bytes = [&](int stage) { return stage == 0 ? G0 : G1; };
  spec.optimizer_s = [](int) { return 0.25; };
  const StepGraph step = step_graph(spec, topo);
  const TaskTimes t = simulate(step.graph, topo);
  // The critical path F0.0 -> F1.0 -> B1.0 -> F1.1 -> B1.1 -> B0.1 crosses two transfers of
  // 1 us each: stage 1's last backward runs from 5 s + 1 us to 7 s + 1 us, stage 0's from 7 s +
  // 2 us to 9 s + 2 us. Stage 0's reduction (0.01 s) hides behind its backward; stage 1's (3 s)
  // ends 1 s after its backward.
  const double stage0_end = 9 + 2 * kLatency, stage1_end = 7 + kLatency;
  EXPECT_NEAR(t.end[size_t(step.optimizer[0])], stage0_end + 0.25, 1e-9);
  EXPECT_NEAR(t.end[size_t(step.optimizer[1])], stage1_end - 2 + ring(2, G1) + 0.25, 1e-9);
  EXPECT_NEAR(t.makespan, std::max(stage0_end, stage1_end - 2 + ring(2, G1)) + 0.25, 1e-9);
  ASSERT_GT(ring(2, G1), 2.5);
  ASSERT_LT(ring(2, G0), 2.0);
}

}  // namespace
}  // namespace h2::parallel::sim
