// Simulator: the figures of SCHEDULES.md (makespans, bubble fractions, peak stashes) for the
// documented case and sweeps of (p, m, v), ZB-H1's bubble, transfer costs, per-stage durations
// and deadlock reporting.
#include "parallel/pipeline/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/pipeline/text_format.h"
#include "schedule_test_helpers.h"

namespace h2::parallel::pipeline {
namespace {

using test_helpers::interleaved_shapes;
using test_helpers::shapes;

constexpr double kEps = 1e-9;

// F = 1/v, B = 2/v per chunk: the same total work per rank as F = 1, B = 2 unchunked.
Durations chunk_durations(int p, int v) {
  Durations d(p * v);
  d.set(ActionKind::F, 1.0 / v).set(ActionKind::B, 2.0 / v);
  return d;
}

Durations split_durations(int stages, double f, double i, double w) {
  Durations d(stages);
  d.set(ActionKind::F, f).set(ActionKind::I, i).set(ActionKind::W, w);
  return d;
}

TEST(PipelineSimulator, SchedulesMdFiguresForFourRanksEightMicroBatches) {
  const SimulationResult g = simulate(gpipe(4, 8), Durations(4));
  const SimulationResult o = simulate(one_f_one_b(4, 8), Durations(4));
  const SimulationResult i = simulate(interleaved_1f1b(4, 2, 8), chunk_durations(4, 2));
  EXPECT_DOUBLE_EQ(g.makespan, 33);
  EXPECT_DOUBLE_EQ(o.makespan, 33);
  EXPECT_NEAR(i.makespan, 28.5, kEps);
  EXPECT_EQ(g.peak_stash, (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(o.peak_stash, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(i.peak_stash, (std::vector<int>{11, 9, 7, 5}));
  // Bubble relative to the work: (p - 1) / m and (p - 1) / (v m); share of the makespan:
  // (p - 1) / (m + p - 1).
  EXPECT_NEAR(g.bubble_over_compute, 3.0 / 8, kEps);
  EXPECT_NEAR(o.bubble_over_compute, 3.0 / 8, kEps);
  EXPECT_NEAR(i.bubble_over_compute, 3.0 / 16, kEps);
  EXPECT_NEAR(o.bubble_fraction, 9.0 / 33, kEps);
  for (int r = 0; r < 4; ++r) {
    EXPECT_DOUBLE_EQ(o.busy[size_t(r)], 24);
    EXPECT_NEAR(i.busy[size_t(r)], 24, kEps);
    EXPECT_DOUBLE_EQ(o.idle(r), 9);
  }
  // ZB-H1 with F = I = W = 1: bubble (p - 1)(F + I - W) = 3, a third of 1F1B's 9.
  const SimulationResult z = simulate(zb_h1(4, 8), split_durations(4, 1, 1, 1));
  EXPECT_DOUBLE_EQ(z.makespan, 27);
  EXPECT_DOUBLE_EQ(z.idle(0), 3);
  EXPECT_EQ(peak_stash(zb_h1(4, 8), StashRelease::kAtI), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(z.peak_stash, (std::vector<int>{4, 4, 4, 4}));
}

TEST(PipelineSimulator, GPipeAndOneFOneBOverShapes) {
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", m = " << m);
    const SimulationResult g = simulate(gpipe(p, m), Durations(p));
    const SimulationResult o = simulate(one_f_one_b(p, m), Durations(p));
    for (const SimulationResult* r : {&g, &o}) {
      EXPECT_DOUBLE_EQ(r->makespan, 3.0 * (m + p - 1));
      EXPECT_NEAR(r->bubble_over_compute, double(p - 1) / m, kEps);
      EXPECT_NEAR(r->bubble_fraction, double(p - 1) / (m + p - 1), kEps);
    }
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(g.peak_stash[size_t(r)], m);
      EXPECT_EQ(o.peak_stash[size_t(r)], std::min(p - r, m)) << "rank " << r;
    }
  }
}

TEST(PipelineSimulator, InterleavedOverShapes) {
  for (auto [p, v, m] : interleaved_shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", v = " << v << ", m = " << m);
    const SimulationResult i = simulate(interleaved_1f1b(p, v, m), chunk_durations(p, v));
    EXPECT_NEAR(i.makespan, 3.0 * m + 3.0 * (p - 1) / v, kEps);
    EXPECT_NEAR(i.bubble_over_compute, double(p - 1) / (v * m), kEps);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(i.peak_stash[size_t(r)], std::min(2 * (p - r - 1) + (v - 1) * p + 1, m * v))
          << "rank " << r;
    }
    // SCHEDULES.md: rank 0 holds v p + p - 1 chunk activations when there are enough.
    if (m * v >= v * p + p - 1) {
      EXPECT_EQ(i.peak_stash[0], v * p + p - 1);
    }
  }
}

TEST(PipelineSimulator, ZbH1BubbleIsPMinusOneTimesFPlusIMinusW) {
  // The postponed W's fill the cool-down when W <= F and W <= I (and m >= p).
  for (auto [p, m] : shapes()) {
    if (m < p) continue;
    for (double f : {1.0, 1.5, 2.0}) {
      for (double in : {1.0, 1.5, 2.0}) {
        for (double w : {0.5, 1.0, 1.5, 2.0}) {
          if (w > f || w > in) continue;
          SCOPED_TRACE(testing::Message() << "p = " << p << ", m = " << m << ", F = " << f
                                          << ", I = " << in << ", W = " << w);
          const SimulationResult z = simulate(zb_h1(p, m), split_durations(p, f, in, w));
          EXPECT_NEAR(z.makespan, m * (f + in + w) + (p - 1) * (f + in - w), kEps);
          EXPECT_NEAR(z.idle(0), (p - 1) * (f + in - w), kEps);
        }
      }
    }
  }
}

TEST(PipelineSimulator, ZbH1HoldsNoMoreThanOneFOneB) {
  for (auto [p, m] : shapes()) {
    const Schedule z = zb_h1(p, m);
    const std::vector<int> ofob = peak_stash(one_f_one_b(p, m));
    // Counting what the input gradient frees: exactly 1F1B's per-rank peaks.
    EXPECT_EQ(peak_stash(z, StashRelease::kAtI), ofob);
    // Keeping the inputs until W: never above 1F1B's peak (rank 0's), p when m >= p.
    const std::vector<int> at_w = peak_stash(z, StashRelease::kAtW);
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(at_w[size_t(r)], ofob[0]);
      if (m >= p) {
        EXPECT_EQ(at_w[size_t(r)], p);
      }
    }
  }
}

TEST(PipelineSimulator, TransferCostsDelayTheConsumer) {
  // p = 2, m = 1: F0 [0,1], SEND_F [1,1.25], RECV_F [1.25,1.75], F1, B1 [1.75,4.75],
  // SEND_B [4.75,5], RECV_B [5,5.5], B0 [5.5,7.5].
  const Schedule s = add_send_recv(one_f_one_b(2, 1));
  Durations d(2);
  d.set(ActionKind::SEND_F, 0.25).set(ActionKind::SEND_B, 0.25);
  d.set(ActionKind::RECV_F, 0.5).set(ActionKind::RECV_B, 0.5);
  const SimulationResult r = simulate(s, d);
  EXPECT_DOUBLE_EQ(r.makespan, 7.5);
  EXPECT_DOUBLE_EQ(r.busy[0], 1 + 0.25 + 0.5 + 2);
  EXPECT_DOUBLE_EQ(r.timeline[1][0].start, 1.25);  // RECV_F waits for the send's end
  // Free transfers: the compute-only makespan.
  EXPECT_DOUBLE_EQ(simulate(s, Durations(2)).makespan, 6);
}

// Two ranks, F = 1, B = 2, every activation and gradient flying T between them (no host cost).
// In the steady state a loop runs through both ranks: rank 1's B(i-1), its gradient (T), rank 0's
// B(i-1) and F(i+1 + k) (3), the activation (T), rank 1's F(i+1 + k). Rank 0 runs 1 + k
// micro-batches ahead (warm-up 1 + k with a lead of k), so the loop spans 2 + k of rank 1's
// periods P, which also need F + B each: P = max(F + B, (2 (F + B) + 2T) / (2 + k)). Plain 1F1B
// (k = 0) pays T per micro-batch; a lead of 1 is compute-bound while T <= 1.5, a lead of 2 while
// T <= 3. Measured as the slope of the makespan in m, which the fill and drain do not change.
TEST(PipelineSimulator, ALeadHidesTheRoundTripOfASlowLink) {
  auto makespan = [](int lead, int m, double T) {
    Durations d(2);
    d.set(ActionKind::F, 1).set(ActionKind::B, 2);
    d.set_flight(1, ActionKind::RECV_F, T).set_flight(0, ActionKind::RECV_B, T);
    return simulate(add_send_recv(one_f_one_b(2, m, lead)), d).makespan;
  };
  for (double T : {0.25, 0.75, 1.5, 3.0}) {
    SCOPED_TRACE(testing::Message() << "T = " << T);
    for (int k : {0, 1, 2}) {
      const double period = std::max(3.0, (6 + 2 * T) / (2 + k));
      EXPECT_NEAR((makespan(k, 24, T) - makespan(k, 12, T)) / 12, period, kEps) << "lead " << k;
    }
    EXPECT_LT(makespan(1, 8, T), makespan(0, 8, T));
  }
  // Free transfers: a lead only delays the first backward; both take the compute-only time.
  EXPECT_NEAR(makespan(1, 8, 0), makespan(0, 8, 0), kEps);
}

TEST(PipelineSimulator, PerStageDurations) {
  // GPipe p = 2, m = 2, stage 1 twice as slow: rank 1 F [1,3] [3,5], B [5,9] [9,13]; rank 0 B
  // [9,11] [13,15].
  Durations d(2);
  d.set(1, ActionKind::F, 2).set(1, ActionKind::B, 4);
  const SimulationResult r = simulate(gpipe(2, 2), d);
  EXPECT_DOUBLE_EQ(r.makespan, 15);
  EXPECT_EQ(r.busy, (std::vector<double>{6, 12}));
  EXPECT_EQ(r.finish, (std::vector<double>{15, 13}));
  EXPECT_NEAR(r.bubble_fraction, 1 - 18.0 / 30, kEps);
}

TEST(PipelineSimulator, TimelineIsConsistent) {
  const Schedule s = lower(interleaved_1f1b(3, 2, 6), {.fsdp = true});
  Durations d(6);
  d.set(ActionKind::RECV_F, 0.1).set(ActionKind::UNSHARD, 0.3).set(2, ActionKind::F, 1.7);
  const SimulationResult r = simulate(s, d);
  for (size_t rank = 0; rank < s.per_rank.size(); ++rank) {
    double prev_end = 0;
    double busy = 0;
    for (size_t i = 0; i < s.per_rank[rank].size(); ++i) {
      const Action& a = s.per_rank[rank][i];
      const Interval& t = r.timeline[rank][i];
      EXPECT_GE(t.start, prev_end - kEps);
      EXPECT_NEAR(t.end - t.start, d.get(a.stage, a.kind), kEps);
      prev_end = t.end;
      busy += t.end - t.start;
    }
    EXPECT_NEAR(busy, r.busy[rank], kEps);
    EXPECT_LE(prev_end, r.makespan + kEps);
  }
}

TEST(PipelineSimulator, DeadlockIsAnErrorNamingTheStuckRanks) {
  const Schedule s = parse_schedule(
      "pipeline ranks=2 stages=2 microbatches=1\n"
      "rank 0: RECV_B0.0<-1 F0.0 SEND_F0.0->1 B0.0\n"
      "rank 1: RECV_F1.0<-0 F1.0 B1.0 SEND_B1.0->0\n");
  try {
    simulate(s, Durations(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 stuck at index 0: RECV_B0.0<-1 waits for SEND_B1.0->0"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("rank 1 stuck at index 0: RECV_F1.0<-0 waits for SEND_F0.0->1"),
              std::string::npos)
        << what;
  }
}

TEST(PipelineSimulator, DurationErrors) {
  Durations d(2);
  EXPECT_THROW(d.set(ActionKind::F, -1), Error);
  EXPECT_THROW(d.set(2, ActionKind::F, 1), Error);
  EXPECT_THROW(Durations(0), Error);
  EXPECT_THROW(simulate(one_f_one_b(3, 3), d), Error);  // 2 stages of durations for 3
  EXPECT_DOUBLE_EQ(d.get(1, ActionKind::B), 2);
  EXPECT_DOUBLE_EQ(d.get(1, ActionKind::SEND_F), 0);
}

}  // namespace
}  // namespace h2::parallel::pipeline
