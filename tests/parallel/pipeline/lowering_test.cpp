// Lowering passes: transfers, FSDP gather/free periods (whole step, max_active_stages, ZeroPP
// groups) and gradient reductions, each checked by the validator on every generated schedule.
#include "parallel/pipeline/lowering.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/simulator.h"
#include "schedule_test_helpers.h"

namespace h2::parallel::pipeline {
namespace {

using test_helpers::count;
using test_helpers::interleaved_shapes;
using test_helpers::is_valid;
using test_helpers::shapes;

std::vector<Schedule> all_generated() {
  std::vector<Schedule> out;
  for (auto [p, m] : shapes()) {
    out.push_back(gpipe(p, m));
    out.push_back(one_f_one_b(p, m));
    out.push_back(zb_h1(p, m));
  }
  for (auto [p, v, m] : interleaved_shapes()) out.push_back(interleaved_1f1b(p, v, m));
  return out;
}

std::string shape_of(const Schedule& s) {
  return "p = " + std::to_string(s.ranks) + ", stages = " + std::to_string(s.stages) +
         ", m = " + std::to_string(s.microbatches) +
         ", F/B/I = " + std::to_string(count(s, ActionKind::B)) + "/" +
         std::to_string(count(s, ActionKind::I));
}

TEST(PipelineLowering, SendRecvOnEverySchedule) {
  for (const Schedule& s : all_generated()) {
    SCOPED_TRACE(shape_of(s));
    const Schedule l = add_send_recv(s);
    EXPECT_TRUE(is_valid(l));
    // One transfer per stage boundary, micro-batch and direction (none with one rank).
    const int boundaries = s.ranks > 1 ? s.stages - 1 : 0;
    for (ActionKind k :
         {ActionKind::SEND_F, ActionKind::RECV_F, ActionKind::SEND_B, ActionKind::RECV_B}) {
      EXPECT_EQ(count(l, k), boundaries * s.microbatches);
    }
  }
}

TEST(PipelineLowering, ReceivesSitRightBeforeTheirConsumer) {
  const Schedule l = add_send_recv(one_f_one_b(3, 6));
  for (const auto& list : l.per_rank) {
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (is_recv(a.kind)) {
        ASSERT_LT(i + 1, list.size());
        const Action& next = list[i + 1];
        EXPECT_EQ(next.kind, a.kind == ActionKind::RECV_F ? ActionKind::F : ActionKind::B);
        EXPECT_EQ(next.stage, a.stage);
        EXPECT_EQ(next.microbatch, a.microbatch);
      }
      if (is_send(a.kind)) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(list[i - 1].kind, a.kind == ActionKind::SEND_F ? ActionKind::F : ActionKind::B);
      }
    }
  }
}

TEST(PipelineLowering, InterleavedSendsWrapFromTheLastRankToTheFirst) {
  const Schedule l = add_send_recv(interleaved_1f1b(2, 2, 2));
  // Stage 1 (rank 1) feeds stage 2 (rank 0).
  const auto& r1 = l.per_rank[1];
  EXPECT_NE(std::find(r1.begin(), r1.end(), Action::comm(ActionKind::SEND_F, 1, 0, 2)), r1.end());
  const auto& r0 = l.per_rank[0];
  EXPECT_NE(std::find(r0.begin(), r0.end(), Action::comm(ActionKind::RECV_F, 2, 0, 1)), r0.end());
  EXPECT_NE(std::find(r0.begin(), r0.end(), Action::comm(ActionKind::SEND_B, 2, 0, 1)), r0.end());
}

TEST(PipelineLowering, SendRecvTwiceIsRefused) {
  const Schedule l = add_send_recv(one_f_one_b(2, 2));
  try {
    add_send_recv(l);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 index 1: SEND_F0.0->1"), std::string::npos)
        << e.what();
  }
}

TEST(PipelineLowering, UnshardOncePerStepByDefault) {
  for (const Schedule& s : all_generated()) {
    SCOPED_TRACE(shape_of(s));
    const Schedule l = add_unshard_reshard(s);
    EXPECT_TRUE(is_valid(l));
    EXPECT_EQ(count(l, ActionKind::UNSHARD), s.stages);
    EXPECT_EQ(count(l, ActionKind::RESHARD), s.stages);
    for (const auto& list : l.per_rank) {
      // Per stage: UNSHARD right before its first compute, RESHARD right after its last.
      for (int st = 0; st < s.stages; ++st) {
        std::vector<size_t> at;
        for (size_t i = 0; i < list.size(); ++i) {
          if (list[i].stage == st) at.push_back(i);
        }
        if (at.empty()) continue;
        EXPECT_EQ(list[at.front()].kind, ActionKind::UNSHARD);
        EXPECT_EQ(list[at.back()].kind, ActionKind::RESHARD);
      }
    }
  }
}

TEST(PipelineLowering, MaxActiveStagesBoundsTheUnshardedChunks) {
  for (auto [p, v, m] : interleaved_shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", v = " << v << ", m = " << m);
    const Schedule s = interleaved_1f1b(p, v, m);
    int previous = 0;
    for (int k = v; k >= 1; --k) {
      const Schedule l = add_unshard_reshard(s, {.max_active_stages = k});
      EXPECT_TRUE(is_valid(l, {.max_active_stages = k}));
      const int gathers = count(l, ActionKind::UNSHARD);
      EXPECT_GE(gathers, s.stages);
      EXPECT_GE(gathers, previous) << "a tighter bound cannot gather less, k = " << k;
      previous = gathers;
    }
    // With one chunk unsharded, the validator rejects a bound of one for the default lowering.
    EXPECT_FALSE(validate(add_unshard_reshard(s), {.max_active_stages = 1}).ok());
  }
}

TEST(PipelineLowering, ZeroPPGroupsOnInterleaved) {
  const Schedule s = interleaved_1f1b(2, 2, 8);
  for (int g : {1, 2, 4, 8}) {
    for (int k : {0, 1, 2}) {
      const Schedule l = add_unshard_reshard(s, {.max_active_stages = k, .group_size = g});
      EXPECT_TRUE(is_valid(l, {.max_active_stages = k})) << "G = " << g << ", k = " << k;
    }
  }
  auto gathers = [&](int k, int g) {
    return count(add_unshard_reshard(s, {.max_active_stages = k, .group_size = g}),
                 ActionKind::UNSHARD);
  };
  // Once per step without a group; larger groups never gather more often.
  EXPECT_EQ(gathers(0, 0), 4);
  EXPECT_EQ(gathers(2, 0), 4);
  for (int k : {0, 2}) {
    EXPECT_GE(gathers(k, 1), gathers(k, 2));
    EXPECT_GT(gathers(k, 2), gathers(k, 4));
    EXPECT_GE(gathers(k, 4), gathers(k, 8));
    EXPECT_GT(gathers(k, 8), gathers(k, 0));
  }
  // One chunk at a time: a gather at every chunk switch, whatever the group.
  EXPECT_EQ(gathers(1, 0), gathers(1, 4));
}

// One rank, two stages alternating micro-batch by micro-batch:
//   F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 B1.3 B0.3 B1.2 B0.2 B1.1 B0.1 B1.0 B0.0
Schedule alternating_two_stages() {
  Schedule s = Schedule::with_shape(1, 2, 4);
  auto& list = s.per_rank[0];
  for (int mb = 0; mb < 4; ++mb) {
    for (int st : {0, 1}) list.push_back(Action::compute(ActionKind::F, st, mb));
  }
  for (int mb = 3; mb >= 0; --mb) {
    for (int st : {1, 0}) list.push_back(Action::compute(ActionKind::B, st, mb));
  }
  return s;
}

TEST(PipelineLowering, ZeroPPGroupClosesItsPeriod) {
  const Schedule s = alternating_two_stages();
  EXPECT_TRUE(is_valid(s));
  auto lowered = [&](UnshardOptions o) {
    const Schedule l = add_unshard_reshard(s, o);
    EXPECT_TRUE(is_valid(l, {.max_active_stages = o.max_active_stages}));
    return l;
  };
  // Whole step: both stages gathered once.
  EXPECT_EQ(count(lowered({}), ActionKind::UNSHARD), 2);
  // G = 2: stage 0 forwards {0,1} {2,3}, backwards {3,2} {1,0}; stage 1 the same, except that
  // F1.3 and B1.3 follow each other and share one period: 4 + 3 gathers.
  const Schedule g2 = lowered({.group_size = 2});
  EXPECT_EQ(count(g2, ActionKind::UNSHARD), 7);
  EXPECT_EQ(g2.per_rank[0][0], Action::stage_wide(ActionKind::UNSHARD, 0));
  // ... F0.1, RESHARD0 after the group's last forward, before F1.1.
  const auto& list = g2.per_rank[0];
  const auto f01 = std::find(list.begin(), list.end(), Action::compute(ActionKind::F, 0, 1));
  ASSERT_NE(f01, list.end());
  EXPECT_EQ(*(f01 + 1), Action::stage_wide(ActionKind::RESHARD, 0));
  // One stage at a time: a gather per run of one stage's actions (15 runs).
  EXPECT_EQ(count(lowered({.max_active_stages = 1}), ActionKind::UNSHARD), 15);
}

TEST(PipelineLowering, ReduceGradAfterTheLastBackward) {
  for (const Schedule& s : all_generated()) {
    SCOPED_TRACE(shape_of(s));
    const Schedule l = add_reduce_grad(s);
    EXPECT_TRUE(is_valid(l));
    EXPECT_EQ(count(l, ActionKind::REDUCE_GRAD), s.stages);
    for (const auto& list : l.per_rank) {
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].kind != ActionKind::REDUCE_GRAD) continue;
        ASSERT_GT(i, 0u);
        EXPECT_TRUE(is_backward(list[i - 1].kind));
        EXPECT_EQ(list[i - 1].stage, list[i].stage);
        for (size_t j = i + 1; j < list.size(); ++j) {
          EXPECT_FALSE(is_backward(list[j].kind) && list[j].stage == list[i].stage);
        }
      }
    }
  }
  // ZB-H1: after the last W.
  const Schedule z = add_reduce_grad(zb_h1(2, 2));
  EXPECT_EQ(z.per_rank[1].back(), Action::stage_wide(ActionKind::REDUCE_GRAD, 1));
  EXPECT_EQ(z.per_rank[1][z.per_rank[1].size() - 2].kind, ActionKind::W);
}

TEST(PipelineLowering, FullLoweringIsValidAndFreeTransfersKeepTheMakespan) {
  for (const Schedule& s : all_generated()) {
    SCOPED_TRACE(shape_of(s));
    for (int k : {0, 1, 2}) {
      const LoweringOptions opt{.fsdp = true, .unshard = {.max_active_stages = k, .group_size = 2}};
      const Schedule l = lower(s, opt);
      EXPECT_TRUE(is_valid(l, {.max_active_stages = k}));
      EXPECT_EQ(count(l, ActionKind::F), s.stages * s.microbatches);
    }
    const Durations d(s.stages);
    EXPECT_DOUBLE_EQ(simulate(lower(s, {.fsdp = true}), d).makespan, simulate(s, d).makespan);
  }
}

TEST(PipelineLowering, PassesRefuseToRunTwice) {
  const Schedule l = lower(one_f_one_b(2, 2), {.fsdp = true});
  EXPECT_THROW(add_unshard_reshard(l), Error);
  EXPECT_THROW(add_reduce_grad(l), Error);
  EXPECT_THROW(add_unshard_reshard(one_f_one_b(2, 2), {.max_active_stages = -1}), Error);
}

}  // namespace
}  // namespace h2::parallel::pipeline
