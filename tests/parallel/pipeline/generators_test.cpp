// Generators: the compute orders of GPipe, 1F1B, interleaved 1F1B and ZB-H1 (warm-up counts,
// layout, the validator's invariants) for several (p, m, v), and their argument errors.
#include "parallel/pipeline/generators.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "schedule_test_helpers.h"

namespace h2::parallel::pipeline {
namespace {

using test_helpers::count;
using test_helpers::forwards_before_first_backward;
using test_helpers::has_warmup;
using test_helpers::interleaved_shapes;
using test_helpers::is_valid;
using test_helpers::shapes;

TEST(PipelineGenerators, EverySchedulePassesTheValidator) {
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", m = " << m);
    for (const Schedule& s : {gpipe(p, m), one_f_one_b(p, m), zb_h1(p, m)}) {
      EXPECT_TRUE(is_valid(s));
      EXPECT_EQ(s.ranks, p);
      EXPECT_EQ(s.stages, p);
      EXPECT_EQ(s.microbatches, m);
      EXPECT_FALSE(s.has_comm());
    }
  }
  for (auto [p, v, m] : interleaved_shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", v = " << v << ", m = " << m);
    EXPECT_TRUE(is_valid(interleaved_1f1b(p, v, m)));
  }
}

TEST(PipelineGenerators, OneFOneBWarmUpIsPMinusRMinusOne) {
  for (auto [p, m] : shapes()) {
    const Schedule s = one_f_one_b(p, m);
    for (int r = 0; r < p; ++r) {
      EXPECT_TRUE(has_warmup(s.per_rank[size_t(r)], std::min(p - r - 1, m)))
          << "p = " << p << ", m = " << m << ", rank " << r;
    }
  }
  // SCHEDULES.md: p = 4, m = 8 -> warm-ups 3, 2, 1, 0, then the steady phase's first forward.
  const Schedule s = one_f_one_b(4, 8);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(has_warmup(s.per_rank[size_t(r)], 3 - r));
    EXPECT_EQ(forwards_before_first_backward(s.per_rank[size_t(r)]), 4 - r);
  }
}

// A lead of k: rank r warms up with (p - r - 1)(1 + k) forwards (at most m), stays valid, and
// holds one stash more than its warm-up at most (SCHEDULES.md's 1F1B invariant, shifted).
TEST(PipelineGenerators, OneFOneBLeadRunsEachRankFurtherAhead) {
  for (auto [p, m] : shapes())
    for (int lead : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "p = " << p << ", m = " << m << ", lead " << lead);
      const Schedule s = one_f_one_b(p, m, lead);
      EXPECT_TRUE(is_valid(s));
      for (int r = 0; r < p; ++r) {
        const int warmup = std::min((p - r - 1) * (1 + lead), m);
        EXPECT_TRUE(has_warmup(s.per_rank[size_t(r)], warmup)) << "rank " << r;
        EXPECT_EQ(forwards_before_first_backward(s.per_rank[size_t(r)]), std::min(warmup + 1, m))
            << "rank " << r;
      }
      EXPECT_EQ(count(s, ActionKind::B), p * m);
    }
  EXPECT_EQ(one_f_one_b(3, 6, 0), one_f_one_b(3, 6));
  EXPECT_EQ(generate(ScheduleKind::k1F1B, 3, 6, 1, 2), one_f_one_b(3, 6, 2));
  EXPECT_THROW(one_f_one_b(2, 4, -1), Error);
  EXPECT_THROW(generate(ScheduleKind::kZBH1, 2, 4, 1, 1), Error);  // only 1F1B runs ahead
}

TEST(PipelineGenerators, OneFOneBAlternatesAfterWarmUp) {
  const Schedule s = one_f_one_b(4, 8);
  // Rank 1: warm-up F0 F1, then (F2 B0) (F3 B1) ... (F7 B5), then B6 B7.
  const auto& list = s.per_rank[1];
  ASSERT_EQ(list.size(), 16u);
  EXPECT_EQ(list[1], Action::compute(ActionKind::F, 1, 1));
  EXPECT_EQ(list[2], Action::compute(ActionKind::F, 1, 2));
  EXPECT_EQ(list[3], Action::compute(ActionKind::B, 1, 0));
  EXPECT_EQ(list[13], Action::compute(ActionKind::B, 1, 5));
  EXPECT_EQ(list[14], Action::compute(ActionKind::B, 1, 6));
  EXPECT_EQ(list[15], Action::compute(ActionKind::B, 1, 7));
}

TEST(PipelineGenerators, GPipeRunsEveryForwardFirst) {
  for (auto [p, m] : shapes()) {
    const Schedule s = gpipe(p, m);
    for (int r = 0; r < p; ++r) {
      const auto& list = s.per_rank[size_t(r)];
      ASSERT_EQ(list.size(), size_t(2 * m));
      EXPECT_EQ(forwards_before_first_backward(list), m);
      for (int mb = 0; mb < m; ++mb) {
        EXPECT_EQ(list[size_t(mb)], Action::compute(ActionKind::F, r, mb));
        EXPECT_EQ(list[size_t(m + mb)], Action::compute(ActionKind::B, r, mb));
      }
    }
  }
}

TEST(PipelineGenerators, InterleavedLayoutAndWarmUp) {
  for (auto [p, v, m] : interleaved_shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", v = " << v << ", m = " << m);
    const Schedule s = interleaved_1f1b(p, v, m);
    EXPECT_EQ(s.stages, p * v);
    EXPECT_EQ(s.chunks(), v);
    for (int st = 0; st < s.stages; ++st) EXPECT_EQ(s.rank_of(st), st % p);
    for (int r = 0; r < p; ++r) {
      const auto& list = s.per_rank[size_t(r)];
      EXPECT_EQ(list.size(), size_t(2 * m * v));
      EXPECT_TRUE(has_warmup(list, std::min(2 * (p - r - 1) + (v - 1) * p, m * v))) << "rank " << r;
      for (const Action& a : list) EXPECT_EQ(a.stage % p, r);
    }
  }
}

TEST(PipelineGenerators, InterleavedGoesThroughTheChunksInGroupsOfP) {
  // p = 2, v = 2, m = 4, rank 0 (stages 0 and 2): forwards 0.0 0.1 2.0 2.1 0.2 0.3 2.2 2.3.
  const Schedule s = interleaved_1f1b(2, 2, 4);
  std::vector<Action> forwards;
  for (const Action& a : s.per_rank[0]) {
    if (a.kind == ActionKind::F) forwards.push_back(a);
  }
  const std::vector<std::pair<int, int>> want = {{0, 0}, {0, 1}, {2, 0}, {2, 1},
                                                 {0, 2}, {0, 3}, {2, 2}, {2, 3}};
  ASSERT_EQ(forwards.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(forwards[i], Action::compute(ActionKind::F, want[i].first, want[i].second));
  }
  // Backwards start with the last chunk.
  for (const Action& a : s.per_rank[0]) {
    if (a.kind == ActionKind::B) {
      EXPECT_EQ(a, Action::compute(ActionKind::B, 2, 0));
      break;
    }
  }
}

TEST(PipelineGenerators, ZbH1SplitsTheBackwardAndKeepsOneFOneBOrder) {
  for (auto [p, m] : shapes()) {
    SCOPED_TRACE(testing::Message() << "p = " << p << ", m = " << m);
    const Schedule z = zb_h1(p, m);
    const Schedule o = one_f_one_b(p, m);
    EXPECT_EQ(count(z, ActionKind::B), 0);
    EXPECT_EQ(count(z, ActionKind::I), p * m);
    EXPECT_EQ(count(z, ActionKind::W), p * m);
    for (int r = 0; r < p; ++r) {
      // Dropping the W's and renaming I to B gives 1F1B.
      std::vector<Action> f_and_i;
      for (Action a : z.per_rank[size_t(r)]) {
        if (a.kind == ActionKind::W) continue;
        if (a.kind == ActionKind::I) a.kind = ActionKind::B;
        f_and_i.push_back(a);
      }
      EXPECT_EQ(f_and_i, o.per_rank[size_t(r)]) << "rank " << r;
    }
  }
}

TEST(PipelineGenerators, ZbH1PostponesWByRank) {
  // Rank 3 of p = 4 runs four F/I pairs before its first W.
  const Schedule s = zb_h1(4, 8);
  const auto& last = s.per_rank[3];
  EXPECT_EQ(last[8], Action::compute(ActionKind::W, 3, 0));
  for (size_t i = 0; i < 8; ++i) EXPECT_NE(last[i].kind, ActionKind::W);
  // Rank 0 runs each W right after its I.
  const auto& first = s.per_rank[0];
  EXPECT_EQ(first[4], Action::compute(ActionKind::I, 0, 0));
  EXPECT_EQ(first[5], Action::compute(ActionKind::W, 0, 0));
}

TEST(PipelineGenerators, InterleavedRejectsMicroBatchesNotDivisibleByRanks) {
  try {
    interleaved_1f1b(4, 2, 6);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("microbatches = 6 must be divisible by ranks = 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(interleaved_1f1b(4, 1, 8), Error);
}

TEST(PipelineGenerators, RejectBadSizes) {
  EXPECT_THROW(gpipe(0, 4), Error);
  EXPECT_THROW(one_f_one_b(2, 0), Error);
  EXPECT_THROW(zb_h1(-1, 4), Error);
  EXPECT_THROW(generate(ScheduleKind::k1F1B, 2, 4, 2), Error);
}

TEST(PipelineGenerators, GenerateByName) {
  for (auto kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B,
                    ScheduleKind::kZBH1}) {
    const auto parsed = parse_schedule_kind(schedule_kind_name(kind));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_FALSE(parse_schedule_kind("2f2b").has_value());
  EXPECT_EQ(generate(ScheduleKind::k1F1B, 3, 6), one_f_one_b(3, 6));
  EXPECT_EQ(generate(ScheduleKind::kInterleaved1F1B, 2, 4, 2), interleaved_1f1b(2, 2, 4));
}

}  // namespace
}  // namespace h2::parallel::pipeline
