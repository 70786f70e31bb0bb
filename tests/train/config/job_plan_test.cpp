// The plan each parallel.mode describes (train/config/job_plan.h): single is one stage on one
// rank, dp that stage replicated on every rank, pipeline the stage groups, layers, schedule and
// wire of the parallel keys, with replicas of the pipeline; and the errors that name the keys.
#include "train/config/job_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "train/config/plan.h"

#include "test_util.h"

namespace h2::config {
namespace {

TrainConfig base() {
  TrainConfig c;
  c.model.n_layers = 4;
  c.train.grad_accum = 4;
  c.train.batch_size = 4;
  return c;
}

TEST(JobPlan, SingleIsOneStageOnOneRankRunningOneFOneB) {
  TrainConfig c = base();
  c.parallel.schedule = ScheduleKind::kGPipe;  // a pipeline key: not used by single or dp
  const parallel::Plan p = plan_from_config(c, 1);
  EXPECT_EQ(p.group_sizes, std::vector<int>{1});
  EXPECT_EQ(p.replicas, 1);
  EXPECT_EQ(p.stages(), 1);
  EXPECT_EQ(p.layout.end(0), 6);  // embedding, 4 blocks, head
  EXPECT_EQ(p.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(p.micro_batches, 4);
  EXPECT_EQ(p.devices, std::vector<std::string>{"cpu"});
  test::expect_config_error([&] { plan_from_config(c, 2); },
                            {"parallel.mode is 'single' but the job has 2 ranks"});
}

TEST(JobPlan, DataParallelReplicatesTheOneStageOnEveryRank) {
  TrainConfig c = base();
  c.parallel.mode = ParallelMode::dp;
  c.parallel.bucket_mb = 0.5;
  c.cluster.devices = "vchip:chip-a,vchip:chip-b,cpu";
  const parallel::Plan p = plan_from_config(c, 3);
  EXPECT_EQ(p.group_sizes, std::vector<int>{1});
  EXPECT_EQ(p.replicas, 3);
  EXPECT_EQ(p.global_micro_batches(), 12);
  EXPECT_EQ(p.bucket_bytes, size_t(1) << 19);
  EXPECT_EQ(p.devices, (std::vector<std::string>{"vchip:chip-a", "vchip:chip-b", "cpu"}));
}

TEST(JobPlan, PipelineTakesGroupsLayersScheduleWireAndReplicas) {
  TrainConfig c = base();
  c.parallel.mode = ParallelMode::pipeline;
  c.parallel.schedule = ScheduleKind::kZBH1;
  c.parallel.stage_ranks = "2,1";
  c.parallel.stage_layers = "3,1";
  c.parallel.wire_dtype = WireDtype::f8e4m3;
  c.parallel.fsdp = true;
  c.parallel.gather_group = 2;
  c.parallel.replicas = 2;
  const parallel::Plan p = plan_from_config(c, 6);
  EXPECT_EQ(p.group_sizes, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.replicas, 2);
  EXPECT_EQ(p.layout.str(), "embedding+blocks 0-2 | block 3+head");
  EXPECT_EQ(p.schedule, ScheduleKind::kZBH1);
  EXPECT_EQ(p.wire_dtype, DType::f8e4m3);
  EXPECT_TRUE(p.fsdp);
  EXPECT_EQ(p.gather_group, 2);
  test::expect_config_error([&] { plan_from_config(c, 5); },
                            {"parallel.replicas = 2", "does not divide the job's 5 ranks"});
  test::expect_config_error(
      [&] { plan_from_config(c, 4); },
      {"parallel.stage_ranks = '2,1'", "makes groups of 3 ranks; a replica has 2"});
  c.parallel.replicas = 1;
  c.parallel.stage_layers = "2,1,1";
  test::expect_config_error([&] { plan_from_config(c, 3); },
                            {"parallel.stage_layers = '2,1,1'", "lists 3 stages; 2 stage groups"});
}

TEST(JobPlan, OneRankPerStageWithoutStageRanks) {
  TrainConfig c = base();
  c.parallel.mode = ParallelMode::pipeline;
  const parallel::Plan p = plan_from_config(c, 4);
  EXPECT_EQ(p.group_sizes, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(p.layout.str(), "embedding+block 0 | block 1 | block 2 | block 3+head");
  EXPECT_FALSE(p.wire_dtype.has_value());
}

// Guards the stage count groups x chunks, formed in int: chunks 2147483647 overflowed it (fuzz
// finding train_config-chunks-overflow). A config holding such a count (the key table bounds
// those it loads) is refused naming the keys, before any layout is built.
TEST(JobPlan, StageCountsPastTheModelAreRefusedWithoutOverflow) {
  TrainConfig c = base();
  c.parallel.mode = ParallelMode::pipeline;
  c.parallel.schedule = ScheduleKind::kInterleaved1F1B;
  c.parallel.chunks = 2147483647;
  test::expect_config_error(
      [&] { plan_from_config(c, 2); },
      {"2 stage groups x parallel.chunks 2147483647", "4294967294 stages", "model's 4 blocks"});
}

// A device that has only a name and a memory size: all the plan's memory check reads.
class SizedDevice final : public Device {
 public:
  explicit SizedDevice(int64_t bytes) {
    props_.name = "sized";
    props_.memory_bytes = bytes;
  }
  DeviceId id() const override { return {"sized", 0}; }
  const DeviceProps& props() const override { return props_; }
  MemoryKind memory_kind() const override { return MemoryKind::host; }
  Allocator& allocator() override { throw std::logic_error("not used by the memory check"); }
  Stream& default_stream() override { throw std::logic_error("not used by the memory check"); }
  std::unique_ptr<Stream> create_stream() override { return nullptr; }
  std::unique_ptr<Event> create_event() override { return nullptr; }
  void copy_bytes(void*, bool, const void*, bool, size_t, Stream&) override {}
  const KernelTable& kernels() const override {
    throw std::logic_error("not used by the memory check");
  }

 private:
  DeviceProps props_;
};

// The memory check refuses a stage exactly when its estimate passes the chip's capacity, with
// the schedule's stash: under 1F1B with 2 stages and 4 micro-batches, stage q keeps p - q
// micro-batches' activations (2 on the first, 1 on the last). A chip of exactly the estimate
// takes the stage; one byte less refuses it naming the rank, the chip and both sizes. (The
// estimate itself is pinned by hand in plan_test.cpp.)
TEST(JobPlan, TheMemoryCheckRefusesAStageOneBytePastTheChip) {
  TrainConfig c = base();
  c.parallel.mode = ParallelMode::pipeline;
  c.parallel.stage_layers = "2,2";
  const parallel::Plan p = plan_from_config(c, 2);
  const int64_t first = estimate_stage_memory(c, 0, 1, true, false, 1, 2).total();
  const int64_t last = estimate_stage_memory(c, 2, 3, false, true, 1, 1).total();
  EXPECT_NO_THROW(check_plan_memory(p, c, 0, SizedDevice(first)));
  EXPECT_NO_THROW(check_plan_memory(p, c, 1, SizedDevice(last)));
  test::expect_config_error([&] { check_plan_memory(p, c, 0, SizedDevice(first - 1)); },
                            {"rank 0 (sized:0, schedule position 0)",
                             fmt::format("need about {:.1f} MiB", double(first) / (1 << 20))});
  test::expect_config_error([&] { check_plan_memory(p, c, 1, SizedDevice(last - 1)); },
                            {"rank 1 (sized:0, schedule position 1)"});
}

}  // namespace
}  // namespace h2::config
