// The simulator's engine on cases with analytic answers:
// - computes on one chip run one after another in the order added, on different chips at once;
// - a transfer ends latency + bytes / bandwidth after its dependencies (the link of its class);
// - two transfers into one port take twice as long as one;
// - a ring all-gather built from transfers (g - 1 steps, each rank forwarding the block it just
//   received) takes (g - 1)(latency + B / g / bandwidth), the cost model's ring formula;
// - a compute waiting for a transfer starts when the bytes have arrived; a delay holds no chip;
// - bad graphs are refused with the task named.
#include "parallel/sim/task_graph.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "sim_fixtures.h"

namespace h2::parallel::sim {
namespace {

TEST(TaskGraph, ComputesOfOneChipRunInOrderOthersAtOnce) {
  const Cluster c = testing::one_node(2);
  const Topology topo(c);
  TaskGraph g;
  const TaskId a = g.compute(0, 1.0);
  const TaskId b = g.compute(0, 2.0);  // no dependency, but chip 0 is busy until 1.0
  const TaskId x = g.compute(1, 1.5);
  const TaskTimes t = simulate(g, topo);
  EXPECT_DOUBLE_EQ(t.end[size_t(a)], 1.0);
  EXPECT_DOUBLE_EQ(t.start[size_t(b)], 1.0);
  EXPECT_DOUBLE_EQ(t.end[size_t(b)], 3.0);
  EXPECT_DOUBLE_EQ(t.end[size_t(x)], 1.5);
  EXPECT_DOUBLE_EQ(t.makespan, 3.0);
}

TEST(TaskGraph, ATransferTakesLatencyPlusBytesOverBandwidth) {
  const Cluster c = testing::two_types();
  const Topology topo(c);
  TaskGraph g;
  const TaskId produce = g.compute(0, 0.25);
  const TaskId send = g.transfer(0, 4, 1e9, {produce});  // cross-type: 2 GB/s, 60 us
  const TaskId consume = g.compute(4, 0.5, {send});
  const TaskTimes t = simulate(g, topo);
  EXPECT_NEAR(t.end[size_t(send)], 0.25 + 60e-6 + 0.5, 1e-12);
  EXPECT_NEAR(t.start[size_t(consume)], t.end[size_t(send)], 1e-15);
  EXPECT_NEAR(t.makespan, 0.25 + 60e-6 + 0.5 + 0.5, 1e-12);
}

TEST(TaskGraph, TwoTransfersIntoOnePortTakeTwiceAsLong) {
  const Cluster c = testing::one_node(3);
  const Topology topo(c);
  TaskGraph g;
  g.transfer(0, 2, 1e9);
  g.transfer(1, 2, 1e9);
  EXPECT_NEAR(simulate(g, topo).makespan, 1e-6 + 2e9 / 100e9, 1e-12);
  TaskGraph apart;  // different receivers: no sharing
  apart.transfer(0, 1, 1e9);
  apart.transfer(1, 2, 1e9);
  EXPECT_NEAR(simulate(apart, topo).makespan, 1e-6 + 1e9 / 100e9, 1e-12);
}

TEST(TaskGraph, ARingAllGatherTakesTheRingFormula) {
  for (int chips : {2, 3, 8}) {
    const Cluster c = testing::one_node(chips);
    const Topology topo(c);
    const double bytes = 64e6, block = bytes / chips;
    TaskGraph g;
    // Step s: rank r sends to r + 1 the block it received in step s - 1 (its own in step 0).
    std::vector<TaskId> received(size_t(chips), -1);
    for (int s = 0; s + 1 < chips; ++s) {
      std::vector<TaskId> next(size_t(chips), -1);
      for (int r = 0; r < chips; ++r) {
        std::vector<TaskId> after;
        if (received[size_t(r)] >= 0) after.push_back(received[size_t(r)]);
        next[size_t((r + 1) % chips)] = g.transfer(r, (r + 1) % chips, block, after);
      }
      received = next;
    }
    const double want = (chips - 1) * (1e-6 + block / 100e9);
    EXPECT_NEAR(simulate(g, topo).makespan, want, 1e-12 * chips) << chips << " chips";
  }
}

TEST(TaskGraph, ADelayOccupiesNoChip) {
  const Cluster c = testing::one_node(1);
  const Topology topo(c);
  TaskGraph g;
  const TaskId wait = g.delay(5.0);
  const TaskId work = g.compute(0, 1.0);  // not held up by the delay
  const TaskId after = g.compute(0, 1.0, {wait});
  const TaskTimes t = simulate(g, topo);
  EXPECT_DOUBLE_EQ(t.end[size_t(work)], 1.0);
  EXPECT_DOUBLE_EQ(t.end[size_t(wait)], 5.0);
  EXPECT_DOUBLE_EQ(t.end[size_t(after)], 6.0);
}

TEST(TaskGraph, BadGraphsAreNamed) {
  const Cluster c = testing::one_node(2);
  const Topology topo(c);
  TaskGraph g;
  EXPECT_THROW(g.compute(0, 1.0, {3}), Error);
  EXPECT_THROW(g.transfer(1, 1, 8), Error);
  EXPECT_THROW(g.compute(0, -1.0), Error);
  g.compute(5, 1.0);
  try {
    simulate(g, topo);
    FAIL() << "a compute on chip 5 of 2 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task 0 computes on chip 5; the cluster has 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace h2::parallel::sim
