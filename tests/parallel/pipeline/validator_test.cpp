// Validator rejections of hand-broken schedules: each message must name the rank, the index and
// the action at fault.
#include "parallel/pipeline/validator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/pipeline/text_format.h"
#include "schedule_test_helpers.h"

namespace h2::parallel::pipeline {
namespace {

using test_helpers::has_error;
using test_helpers::is_valid;

// Removes the first occurrence of `a` from rank `r`'s list; returns its index.
size_t erase(Schedule& s, int r, const Action& a) {
  auto& list = s.per_rank[size_t(r)];
  auto it = std::find(list.begin(), list.end(), a);
  EXPECT_NE(it, list.end()) << to_string(a) << " not on rank " << r;
  const auto index = size_t(it - list.begin());
  list.erase(it);
  return index;
}

size_t index_of(const Schedule& s, int r, const Action& a) {
  const auto& list = s.per_rank[size_t(r)];
  return size_t(std::find(list.begin(), list.end(), a) - list.begin());
}

const Action F(int s, int mb) {
  return Action::compute(ActionKind::F, s, mb);
}
const Action B(int s, int mb) {
  return Action::compute(ActionKind::B, s, mb);
}

TEST(PipelineValidator, RejectsAMissingB) {
  Schedule s = one_f_one_b(4, 8);
  erase(s, 1, B(1, 3));
  const ValidationReport r = validate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, 1, {"missing B1.3"})) << r.to_string();
  // Stage 0 never gets that gradient: the replay is stuck there.
  EXPECT_TRUE(has_error(r, 0, {"deadlock", "B0.3", "waits for I1.3 (or B1.3)"})) << r.to_string();
}

TEST(PipelineValidator, RejectsADuplicatedF) {
  Schedule s = gpipe(2, 4);
  s.per_rank[0].insert(s.per_rank[0].begin() + 3, F(0, 1));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 3: F0.1 duplicates index 1"})) << r.to_string();
  EXPECT_EQ(r.errors.size(), 1u) << r.to_string();
  EXPECT_EQ(r.errors[0].rank, 0);
  EXPECT_EQ(r.errors[0].index, 3);
}

TEST(PipelineValidator, RejectsASendWithoutItsReceive) {
  Schedule s = add_send_recv(one_f_one_b(2, 4));
  erase(s, 1, Action::comm(ActionKind::RECV_F, 1, 2, 0));
  const size_t send = index_of(s, 0, Action::comm(ActionKind::SEND_F, 0, 2, 1));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0,
                        {"rank 0 index " + std::to_string(send) +
                         ": SEND_F0.2->1 has no matching RECV_F1.2<-0 on rank 1"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"F1.2 has no RECV_F1.2<-0 before it"})) << r.to_string();
}

TEST(PipelineValidator, RejectsAReceiveWithoutItsSend) {
  Schedule s = add_send_recv(one_f_one_b(2, 2));
  erase(s, 1, Action::comm(ActionKind::SEND_B, 1, 0, 0));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"RECV_B0.0<-1 has no matching SEND_B1.0->0 on rank 1"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 0,
                        {"deadlock: rank 0 stuck at index",
                         "RECV_B0.0<-1 waits for "
                         "SEND_B1.0->0"}))
      << r.to_string();
}

TEST(PipelineValidator, ReportsADeadlockOfTwoRanksReceivingFirst) {
  const Schedule s = parse_schedule(
      "pipeline ranks=2 stages=2 microbatches=1\n"
      "rank 0: RECV_B0.0<-1 F0.0 SEND_F0.0->1 B0.0\n"
      "rank 1: RECV_F1.0<-0 F1.0 B1.0 SEND_B1.0->0\n");
  const ValidationReport r = validate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r, 0,
                        {"rank 0 index 0: deadlock: rank 0 stuck at index 0: RECV_B0.0<-1 "
                         "waits for SEND_B1.0->0"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1,
                        {"rank 1 index 0: deadlock: rank 1 stuck at index 0: RECV_F1.0<-0 "
                         "waits for SEND_F0.0->1"}))
      << r.to_string();
  EXPECT_THROW(check_valid(s), Error);
}

TEST(PipelineValidator, ReportsADeadlockOfComputeOnlyOrders) {
  // Rank 0 runs B0.0 before F0.1 while rank 1 wants F1.1 first: GPipe on rank 1, a cyclic wait.
  Schedule s = Schedule::with_shape(2, 2, 2);
  s.per_rank[0] = {F(0, 0), B(0, 0), F(0, 1), B(0, 1)};
  s.per_rank[1] = {F(1, 0), F(1, 1), B(1, 0), B(1, 1)};
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"deadlock", "B0.0 waits for I1.0 (or B1.0)"})) << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"deadlock", "index 1: F1.1 waits for F0.1"})) << r.to_string();
}

TEST(PipelineValidator, RejectsAReshardBeforeTheLastUse) {
  Schedule s = lower(one_f_one_b(2, 4), {.fsdp = true});
  // Move rank 0's RESHARD0 right after F0.3, before the last backwards.
  const Action reshard = Action::stage_wide(ActionKind::RESHARD, 0);
  erase(s, 0, reshard);
  auto& list = s.per_rank[0];
  list.insert(list.begin() + long(index_of(s, 0, F(0, 3))) + 1, reshard);
  const size_t at = index_of(s, 0, reshard);
  const size_t use = index_of(s, 0, B(0, 2));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0,
                        {"rank 0 index " + std::to_string(use) +
                         ": B0.2 uses stage 0 after RESHARD0 at index " + std::to_string(at)}))
      << r.to_string();
}

TEST(PipelineValidator, RejectsAReduceGradBeforeTheLastBackward) {
  Schedule s = lower(one_f_one_b(2, 4), {.fsdp = true});
  const Action reduce = Action::stage_wide(ActionKind::REDUCE_GRAD, 1);
  erase(s, 1, reduce);
  auto& list = s.per_rank[1];
  list.insert(list.begin() + long(index_of(s, 1, B(1, 0))) + 1, reduce);
  const size_t at = index_of(s, 1, reduce);
  const size_t last = index_of(s, 1, B(1, 3));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 1,
                        {"rank 1 index " + std::to_string(at) +
                         ": REDUCE_GRAD1 comes before "
                         "B1.3 at index " +
                         std::to_string(last) + ", the stage's last backward"}))
      << r.to_string();
}

TEST(PipelineValidator, RejectsTooManyUnshardedStages) {
  const Schedule s = lower(interleaved_1f1b(2, 2, 4), {.fsdp = true});
  const ValidationReport r = validate(s, {.max_active_stages = 1});
  EXPECT_TRUE(has_error(r, 0,
                        {"UNSHARD2 leaves 2 stages unsharded (0, 2), above max_active_stages "
                         "= 1"}))
      << r.to_string();
  EXPECT_TRUE(is_valid(s, {.max_active_stages = 2}));
}

TEST(PipelineValidator, RejectsUnbalancedUnshardReshard) {
  Schedule s = lower(one_f_one_b(2, 2), {.fsdp = true, .send_recv = false});
  s.per_rank[0].insert(s.per_rank[0].begin() + 1, Action::stage_wide(ActionKind::UNSHARD, 0));
  erase(s, 1, Action::stage_wide(ActionKind::RESHARD, 1));
  s.per_rank[1].insert(s.per_rank[1].begin(), Action::stage_wide(ActionKind::RESHARD, 1));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0,
                        {"rank 0 index 1: UNSHARD0 while stage 0 is already unsharded "
                         "(UNSHARD at index 0)"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"rank 1 index 0: RESHARD1 while stage 1 is not unsharded"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"rank 1: stage 1 is never resharded after UNSHARD1 at index 1"}))
      << r.to_string();
}

TEST(PipelineValidator, RejectsComputeBeforeAnyUnshard) {
  Schedule s = lower(one_f_one_b(2, 2), {.fsdp = true, .send_recv = false});
  erase(s, 1, Action::stage_wide(ActionKind::UNSHARD, 1));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 1, {"rank 1 index 0: F1.0 runs before any UNSHARD1"})) << r.to_string();
}

TEST(PipelineValidator, RejectsAMissingReduceGrad) {
  Schedule s = add_reduce_grad(one_f_one_b(2, 2));
  erase(s, 0, Action::stage_wide(ActionKind::REDUCE_GRAD, 0));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"missing REDUCE_GRAD0"})) << r.to_string();
}

TEST(PipelineValidator, RejectsBackwardOrderErrors) {
  Schedule s = Schedule::with_shape(1, 1, 3);
  s.per_rank[0] = {B(0, 0),
                   F(0, 0),
                   F(0, 1),
                   Action::compute(ActionKind::W, 0, 1),
                   Action::compute(ActionKind::I, 0, 1),
                   F(0, 2),
                   B(0, 2),
                   Action::compute(ActionKind::I, 0, 2)};
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 0: B0.0 runs before its F0.0 at index 1"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 3: W0.1 runs before its I0.1 at index 4"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 6: B0.2 mixes a full backward with a split one"}))
      << r.to_string();
}

TEST(PipelineValidator, RejectsASplitBackwardMissingW) {
  Schedule s = zb_h1(2, 2);
  erase(s, 1, Action::compute(ActionKind::W, 1, 1));
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 1, {"missing W1.1"})) << r.to_string();
}

TEST(PipelineValidator, RejectsMalformedActions) {
  Schedule s = one_f_one_b(2, 2);
  s.per_rank[0].push_back(F(1, 0));                                    // stage of rank 1
  s.per_rank[1].push_back(F(1, 7));                                    // micro-batch range
  s.per_rank[1].push_back(Action::comm(ActionKind::SEND_F, 1, 0, 0));  // wrong direction
  s.per_rank[0].push_back(F(5, 0));                                    // stage range
  const ValidationReport r = validate(s);
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 4: F1.0: stage 1 lives on rank 1, not on rank 0"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"rank 1 index 4: F1.7: micro-batch 7 outside [0, 2)"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 1, {"rank 1 index 5: SEND_F1.0->0: peer 0 is not the next stage"}))
      << r.to_string();
  EXPECT_TRUE(has_error(r, 0, {"rank 0 index 5: F5.0: stage 5 outside [0, 2)"})) << r.to_string();
  EXPECT_EQ(r.errors.size(), 4u) << r.to_string();
}

TEST(PipelineValidator, RejectsABadShape) {
  Schedule s = one_f_one_b(2, 2);
  s.stage_rank[1] = 3;
  const ValidationReport r = validate(s);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("stage 1 is mapped to rank 3"), std::string::npos);
}

TEST(PipelineValidator, CheckValidListsEveryProblem) {
  Schedule s = gpipe(2, 2);
  s.per_rank[0].push_back(F(0, 0));
  s.per_rank[1].push_back(F(1, 1));
  try {
    check_valid(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 problems"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0 index 4: F0.0 duplicates index 0"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1 index 4: F1.1 duplicates index 1"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace h2::parallel::pipeline
