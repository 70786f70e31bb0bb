// The plan type: where each job rank sits (replica-major, groups in pipeline order), the refusals
// of check() naming the plan's source, the one-line description, and the lowered schedule a
// one-stage plan runs (each micro-batch's forward, then its backward, then one gradient
// reduction: what a single process or a data-parallel rank has always done).
#include "parallel/plan.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace h2::parallel {
namespace {

using pipeline::ActionKind;
using pipeline::StageLayout;

// Two replicas of a (2, 1)-rank pipeline of 4 blocks split 3 + 1.
Plan hetero_replicated() {
  Plan p;
  p.group_sizes = {2, 1};
  p.replicas = 2;
  p.layout = StageLayout::from_block_counts({3, 1}, 4);
  p.micro_batches = 4;
  p.micro_batch_rows = 4;
  p.devices.assign(6, "cpu");
  p.source = "test.yaml";
  return p;
}

template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

TEST(Plan, RanksAreReplicaMajorWithGroupsInPipelineOrder) {
  const Plan p = hetero_replicated();
  EXPECT_EQ(p.ranks_per_replica(), 3);
  EXPECT_EQ(p.world_size(), 6);
  EXPECT_EQ(p.global_micro_batches(), 8);
  const Plan::Place want[] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}, {1, 0, 1}, {1, 1, 0}};
  for (int rank = 0; rank < 6; ++rank) {
    const Plan::Place got = p.place_of(rank);
    EXPECT_EQ(got.replica, want[rank].replica) << rank;
    EXPECT_EQ(got.position, want[rank].position) << rank;
    EXPECT_EQ(got.group_rank, want[rank].group_rank) << rank;
    EXPECT_EQ(p.rank_at(got), rank);
  }
  EXPECT_NO_THROW(p.check());
}

TEST(Plan, CheckRefusesWhatNoRuntimeCanRunNamingTheSource) {
  Plan p = hetero_replicated();
  p.micro_batch_rows = 3;  // group 0 has 2 ranks
  EXPECT_NE(config_error([&] { p.check(); }).find("test.yaml: micro-batches of 3 rows"),
            std::string::npos);
  p = hetero_replicated();
  p.layout = StageLayout::uniform(4, 3);
  EXPECT_NE(config_error([&] { p.check(); }).find("a layout of 3 stages for 2 groups x 1 chunks"),
            std::string::npos);
  p = hetero_replicated();
  p.chunks = 2;
  p.layout = StageLayout::uniform(4, 4);
  EXPECT_NE(config_error([&] { p.check(); }).find("need the interleaved-1f1b schedule, not 1f1b"),
            std::string::npos);
  p = hetero_replicated();
  p.devices.pop_back();
  EXPECT_NE(config_error([&] { p.check(); }).find("5 devices for a plan of 6 ranks"),
            std::string::npos);
  p = hetero_replicated();
  p.overlap = false;  // the no-overlap baseline: plain schedules only
  EXPECT_NO_THROW(p.check());
  p.lead = 1;
  EXPECT_NE(config_error([&] { p.check(); })
                .find("overlap off (blocking sends, a baseline) runs gpipe, 1f1b and zb-h1 without "
                      "a lead; this plan has 1f1b with lead 1 and 1 chunks"),
            std::string::npos);
}

TEST(Plan, DescribesItselfInOneLine) {
  const Plan p = hetero_replicated();
  EXPECT_EQ(p.str(),
            "2 stages (embedding+blocks 0-2 | block 3+head) on groups of 2+1 ranks x 2 replicas, "
            "1f1b, 4 micro-batches of 4 rows");
  Plan dp;
  dp.group_sizes = {1};
  dp.replicas = 3;
  dp.layout = StageLayout::uniform(4, 1);
  dp.micro_batches = 2;
  dp.micro_batch_rows = 8;
  dp.wire_dtype = DType::bf16;
  EXPECT_EQ(dp.str(),
            "1 stage x 3 replicas (data parallel), 1f1b, 2 micro-batches of 8 rows, bf16 wire");
}

TEST(Plan, OneStageRunsEachMicroBatchForwardThenBackwardThenOneReduction) {
  Plan p;
  p.group_sizes = {1};
  p.layout = StageLayout::uniform(2, 1);
  p.micro_batches = 3;
  p.devices = {"cpu"};
  const pipeline::Schedule s = p.lowered_schedule();
  ASSERT_EQ(s.per_rank.size(), 1u);
  std::string order;
  for (const pipeline::Action& a : s.per_rank[0])
    order += std::string(pipeline::action_kind_name(a.kind)) +
             (a.microbatch >= 0 ? std::to_string(a.microbatch) : "") + " ";
  EXPECT_EQ(order, "F0 B0 F1 B1 F2 B2 REDUCE_GRAD ");
}

}  // namespace
}  // namespace h2::parallel
