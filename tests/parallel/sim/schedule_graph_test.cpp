// A pipeline schedule as a task graph, against the pipeline simulator and analytic values:
// - free transfers, equal stages: 1F1B takes (m + p - 1)(F + B), so the bubble is
//   (p - 1) / (m + p - 1), exactly, as pipeline::simulate says;
// - transfers that never share a port (neighbours over different link classes, each shorter
//   than a compute): exactly pipeline::simulate's makespan with flights of latency + bytes /
//   bandwidth, for GPipe and 1F1B;
// - two activations in flight through one port at once share it (worked out below), which the
//   pipeline simulator, whose flights are independent, does not see.
#include "parallel/sim/schedule_graph.h"

#include <gtest/gtest.h>

#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "sim_fixtures.h"

namespace h2::parallel::sim {
namespace {

using pipeline::ActionKind;
using pipeline::Durations;
using pipeline::Schedule;

double makespan(const Schedule& lowered, const Durations& d, const Topology& topo,
                double bytes_per_transfer) {
  std::vector<std::vector<int>> chips;
  for (int q = 0; q < lowered.ranks; ++q) chips.push_back({q});
  const ScheduleGraph sg = schedule_graph(lowered, d, chips, /*rows=*/4,
                                          [&](int, ActionKind) { return bytes_per_transfer; });
  return simulate(sg.graph, topo).makespan;
}

TEST(ScheduleGraph, FreeTransfersGiveTheAnalyticBubble) {
  Cluster c = testing::one_node(4);
  c.intra_node["a"].latency = 0;
  const Topology topo(c);
  for (int m : {4, 8, 16}) {
    const Schedule lowered = pipeline::add_send_recv(pipeline::one_f_one_b(4, m));
    const Durations d(4);  // F 1, B 2, transfers 0
    const double want = (m + 4 - 1) * 3.0;
    EXPECT_DOUBLE_EQ(makespan(lowered, d, topo, 0.0), want) << m;
    EXPECT_DOUBLE_EQ(pipeline::simulate(lowered, d).makespan, want) << m;
    // bubble = 1 - m (F + B) / makespan = (p - 1) / (m + p - 1)
    EXPECT_NEAR(1 - m * 3.0 / want, 3.0 / (m + 3), 1e-15);
  }
}

TEST(ScheduleGraph, TransfersThatNeverShareAPortMatchThePipelineSimulator) {
  // Nodes of 2: chips 0-1 and 2-3. Each chip's two neighbours are one within its node and one
  // across, so the activation and the gradient it sends (and receives) use different ports;
  // every transfer (at most 0.2 s) ends before its port's next one starts (a compute, 1 s,
  // apart).
  Cluster c;
  c.name = "pairs";
  c.chips = {ChipSpec{.name = "a"}};
  c.nodes = {{"a", 2}, {"a", 2}};
  c.intra_node = {{"a", {100e9, 1e-6}}};
  c.inter_node = {{"a", {25e9, 5e-6}}};
  const Topology topo(c);
  const double bytes = 5e9;
  for (const Schedule& plain : {pipeline::gpipe(4, 6), pipeline::one_f_one_b(4, 6)}) {
    const Schedule lowered = pipeline::add_send_recv(plain);
    Durations d(4);
    for (int s = 0; s < 4; ++s) {
      if (s > 0) d.set_flight(s, ActionKind::RECV_F, c.link(s - 1, s).seconds(bytes));
      if (s < 3) d.set_flight(s, ActionKind::RECV_B, c.link(s + 1, s).seconds(bytes));
    }
    const double want = pipeline::simulate(lowered, d).makespan;
    EXPECT_GT(want, (6 + 3) * 3.0);  // the flights are on the critical path
    EXPECT_NEAR(makespan(lowered, d, topo, bytes), want, 1e-9);
  }
}

// GPipe, 2 stages, 2 micro-batches, F 1 s, one activation 3 s on the link alone (latency 0).
// Activation 0 leaves at 1 s and moves alone until activation 1 leaves at 2 s (a third of it
// moved); both then share the port at half speed: activation 0's last two thirds take 4 s (ends
// at 6 s), by when activation 1 moved two thirds and ends alone 1 s later (7 s). Independent
// flights would arrive at 4 s and 5 s.
TEST(ScheduleGraph, ActivationsInFlightTogetherShareThePort) {
  Cluster c = testing::one_node(2);
  c.intra_node["a"].latency = 0;
  const Topology topo(c);
  const Schedule lowered = pipeline::add_send_recv(pipeline::gpipe(2, 2));
  const Durations d(2);
  const ScheduleGraph sg =
      schedule_graph(lowered, d, {{0}, {1}}, 4, [](int, ActionKind) { return 3 * 100e9; });
  const TaskTimes t = simulate(sg.graph, topo);
  std::vector<double> arrivals;
  for (size_t i = 0; i < lowered.per_rank[1].size(); ++i)
    if (lowered.per_rank[1][i].kind == ActionKind::RECV_F)
      arrivals.push_back(t.end[size_t(sg.transfer_tasks[1][i][0].at(0))]);
  ASSERT_EQ(arrivals.size(), 2u);
  EXPECT_NEAR(arrivals[0], 6.0, 1e-9);
  EXPECT_NEAR(arrivals[1], 7.0, 1e-9);
  // Rank 1 runs F at 6-7 and 7-8, B at 8-10 and 10-12. Gradient 0 leaves at 10 (two thirds
  // moved by 12), gradient 1 at 12: they share until gradient 0 ends at 14, gradient 1 ends
  // alone at 16. Rank 0's backwards: 14-16 and 16-18.
  EXPECT_NEAR(t.makespan, 18.0, 1e-9);
}

// HeteroPP groups: with free transfers, groups of any size give the analytic 1F1B step (every
// chip of a group runs the stage's actions at once).
TEST(ScheduleGraph, GroupsWithFreeTransfersGiveTheAnalyticStep) {
  Cluster c = testing::one_node(6);
  c.intra_node["a"].latency = 0;
  const Topology topo(c);
  const Schedule lowered = pipeline::add_send_recv(pipeline::one_f_one_b(3, 6));
  const ScheduleGraph sg = schedule_graph(lowered, Durations(3), {{0, 1}, {2}, {3, 4, 5}}, 6,
                                          [](int, ActionKind) { return 0.0; });
  EXPECT_DOUBLE_EQ(simulate(sg.graph, topo).makespan, (6 + 3 - 1) * 3.0);
}

// Re-split between groups (the runtime's rows): a group of 2 sending to a group of 3, 6 rows:
// chip 0 holds rows 0-2 (to chip 2: rows 0-1, chip 3: row 2), chip 1 rows 3-5 (to chip 3: row
// 3, chip 4: rows 4-5). With B bytes per micro-batch, bandwidth W and no latency, every piece
// leaves at once: chip 0 sends 2B/6 and B/6 through one port at W/2 each, so the B/6 piece ends
// at B/3W and the other then runs alone, ending at B/2W (3B/6 in all through the port); chip 1
// likewise. Chip 3's receive port carries its two pieces at W/2 each: both end at B/3W.
TEST(ScheduleGraph, PiecesBetweenGroupsOfDifferentSizesFollowTheRows) {
  Cluster c = testing::one_node(5);
  c.intra_node["a"].latency = 0;
  const Topology topo(c);
  const Schedule lowered = pipeline::add_send_recv(pipeline::gpipe(2, 1));
  Durations d(2);
  d.set(ActionKind::F, 0).set(ActionKind::B, 0);
  const double B = 6e9, W = 100e9;
  const ScheduleGraph sg =
      schedule_graph(lowered, d, {{0, 1}, {2, 3, 4}}, 6, [&](int, ActionKind) { return B; });
  const TaskTimes t = simulate(sg.graph, topo);
  size_t recv = 0;
  while (lowered.per_rank[1][recv].kind != ActionKind::RECV_F) ++recv;
  const auto& pieces = sg.transfer_tasks[1][recv];
  ASSERT_EQ(pieces[0].size(), 1u);  // chip 2: rows 0-1 from chip 0
  ASSERT_EQ(pieces[1].size(), 2u);  // chip 3: row 2 from chip 0, row 3 from chip 1
  ASSERT_EQ(pieces[2].size(), 1u);  // chip 4: rows 4-5 from chip 1
  EXPECT_NEAR(t.end[size_t(pieces[0][0])], B / 2 / W, 1e-12);
  EXPECT_NEAR(t.end[size_t(pieces[1][0])], B / 3 / W, 1e-12);
  EXPECT_NEAR(t.end[size_t(pieces[1][1])], B / 3 / W, 1e-12);
  EXPECT_NEAR(t.end[size_t(pieces[2][0])], B / 2 / W, 1e-12);
}

// FSDP on one stage over a group of g chips (one node, W = 100 GB/s, 1 us): UNSHARD and
// REDUCE_GRAD exchange 1/g of P (parameters) or G (gradients) between every pair; each port
// carries g - 1 pieces at once, so a gather takes 1 us + (g - 1)/g P / W, the ring's bandwidth
// term, before the m (F + B) of compute, and the reduction likewise after it.
TEST(ScheduleGraph, FsdpGathersAndReductionsAreExchangesInTheGroup) {
  const double P = 3e9, G = 6e9, W = 100e9, F = 1.0, B = 2.0;
  const int m = 4;
  pipeline::LoweringOptions fsdp;
  fsdp.fsdp = true;
  const Schedule lowered = pipeline::lower(pipeline::one_f_one_b(1, m), fsdp);
  for (int g : {2, 3}) {
    const Cluster c = testing::one_node(g);
    const Topology topo(c);
    std::vector<int> group;
    for (int k = 0; k < g; ++k) group.push_back(k);
    const ScheduleGraph sg =
        schedule_graph(lowered, Durations(1), {group}, 6, [&](int, ActionKind kind) {
          return kind == ActionKind::UNSHARD ? P : kind == ActionKind::REDUCE_GRAD ? G : 0.0;
        });
    const double gather = 1e-6 + (g - 1) * P / g / W, reduce = 1e-6 + (g - 1) * G / g / W;
    EXPECT_NEAR(simulate(sg.graph, topo).makespan, gather + m * (F + B) + reduce, 1e-9) << g;
  }
}

// ZeroPP's overlap on one stage over two chips (one node, W = 100 GB/s, 1 us; each chip sends
// to one peer, so no port is shared), 1F1B over m = 2 micro-batches, F = 1 and B = 2 in two units
// of equal halves. UNSHARD posts both units' gathers: unit 0's half arrives at t_g = 1 us +
// (P_u / 2) / W, unit 1's t_g later; unit 0 computes from t_g, unit 1 from max(t_g + 0.5, 2 t_g).
// The last backward posts unit 1's reduction when its half ends and unit 0's when the backward
// ends; REDUCE_GRAD waits t_r = 1 us + (G_u / 2) / W past it. With transfers shorter than a unit's
// compute the step is t_g + m (F + B) + t_r, what the cost model's prefetched gather and
// overlapped reduction charge; exchanged whole it is 2 t_g + m (F + B) + 2 t_r (less two 1 us
// latencies).
TEST(ScheduleGraph, OverlappedFsdpWaitsOnlyForTheFirstGatherAndTheLastReduction) {
  const double W = 100e9, t_g = 0.3, t_r = 0.4;
  const double P_u = 2 * (t_g - 1e-6) * W, G_u = 2 * (t_r - 1e-6) * W;
  const int m = 2;
  pipeline::LoweringOptions fsdp;
  fsdp.fsdp = true;
  const Schedule lowered = pipeline::lower(pipeline::one_f_one_b(1, m), fsdp);
  const Cluster c = testing::one_node(2);
  const Topology topo(c);
  const TransferBytes whole = [&](int, ActionKind kind) {
    return kind == ActionKind::UNSHARD ? 2 * P_u : kind == ActionKind::REDUCE_GRAD ? 2 * G_u : 0.0;
  };
  const StageUnits units{.forward_s = {0.5, 0.5},
                         .last_backward_s = {1.0, 1.0},
                         .gather_bytes = {P_u, P_u},
                         .reduce_bytes = {G_u, G_u},
                         .gather_staging_s = {0, 0},
                         .reduce_staging_s = {0, 0}};
  const ScheduleGraph overlapped =
      schedule_graph(lowered, Durations(1), {{0, 1}}, 2, whole, {units});
  EXPECT_NEAR(simulate(overlapped.graph, topo).makespan, t_g + m * 3.0 + t_r, 1e-9);
  const ScheduleGraph blocking = schedule_graph(lowered, Durations(1), {{0, 1}}, 2, whole);
  EXPECT_NEAR(simulate(blocking.graph, topo).makespan, 2 * t_g + m * 3.0 + 2 * t_r - 2e-6, 1e-9);

  // A unit's staging delays its pieces, and the next unit's staging waits for them: unit 0
  // now arrives at 0.1 + t_g, unit 1 at 2 (0.1 + t_g) = 0.8, while unit 0 computes until 0.9.
  StageUnits staged = units;
  staged.gather_staging_s = {0.1, 0.1};
  const ScheduleGraph with_staging =
      schedule_graph(lowered, Durations(1), {{0, 1}}, 2, whole, {staged});
  EXPECT_NEAR(simulate(with_staging.graph, topo).makespan, 0.1 + t_g + m * 3.0 + t_r, 1e-9);
}

// An FSDP group of four chips on two nodes of two (two_types: in the node 100 GB/s and 1 us,
// between nodes 25 GB/s and 5 us, both at time scale 2). Host-staged chips move a collective of
// P bytes as one ring, whose two hops between the nodes carry 3/4 P each: 10 us + 3/4 P /
// 12.5 GB/s. Device-direct chips (a vendor library on every network rail) move it in two levels
// at once: 1/4 P to the counterpart in the other node (10 us + P/4 / 12.5 GB/s) and 1/2 P to the
// node's other chip (2 us + P/2 / 50 GB/s); the slower ends the collective.
TEST(ScheduleGraph, DeviceDirectGroupsOverNodesCollectInTwoLevels) {
  const double P = 5e9;
  pipeline::LoweringOptions fsdp;
  fsdp.fsdp = true;
  const Schedule lowered = pipeline::lower(pipeline::one_f_one_b(1, 1), fsdp);
  const TransferBytes bytes = [&](int, ActionKind kind) {
    return kind == ActionKind::UNSHARD ? P : 0.0;
  };
  for (bool direct : {false, true}) {
    Cluster c = testing::two_types();
    c.chips[0].device_direct = direct;
    const Topology topo(c);
    const ScheduleGraph sg =
        schedule_graph(lowered, Durations(1), {{0, 1, 2, 3}}, 4, bytes, {}, &topo);
    const double gather =
        direct ? std::max(10e-6 + P / 4 / 12.5e9, 2e-6 + P / 2 / 50e9) : 10e-6 + 0.75 * P / 12.5e9;
    const double reduce = 10e-6;  // REDUCE_GRAD moves nothing but waits its streams' latency
    EXPECT_NEAR(simulate(sg.graph, topo).makespan, gather + 3.0 + reduce, 1e-9) << direct;
  }
}

}  // namespace
}  // namespace h2::parallel::sim
