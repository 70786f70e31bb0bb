// A pipeline rank killed while its transfers are in segments: the surviving rank ends with an
// error that names the killed rank, within the communication timeout, instead of waiting for
// the segments that will never come. Every transfer of the run is cut into 1 KiB segments (16 per
// 16 KiB activation or gradient), so the kill lands between the segments of a transfer or
// between transfers; either way the survivor must not hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "multiproc.h"
#include "support/training_runs.h"
#include "train/trainer.h"

namespace h2::train {
namespace {

using namespace testing;

TEST(PipelineFailure, ARankKilledMidSegmentIsNamedWithinTheTimeout) {
  config::TrainConfig cfg = small_config(fresh_dir("h2_pp_kill"), 4);
  cfg.model.tie_embeddings = false;
  cfg.train.steps = 1000000;  // runs until the kill
  cfg.train.eval_every = 0;
  cfg.train.grad_accum = 8;
  cfg.log.metrics_file.clear();
  cfg.parallel.mode = config::ParallelMode::pipeline;
  cfg.parallel.segment_kb = 1;

  comm::testing::RunOptions options;
  options.comm_timeout_s = 20;
  double killed_at = 0;
  const auto start = std::chrono::steady_clock::now();
  options.while_running = [&](const std::vector<int>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // well into training
    kill(pids[1], SIGKILL);
    killed_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto outcomes = comm::testing::run_ranks(
      2,
      [&](comm::testing::RankContext& ctx) {
        Trainer trainer(
            cfg, ctx.runtime, [](const std::string&) {}, ctx.comm());
        trainer.run();
      },
      options);
  const std::string all = comm::testing::describe(outcomes);
  EXPECT_EQ(outcomes[1].signal, SIGKILL) << all;
  EXPECT_EQ(outcomes[0].exit_code, 1) << all;
  EXPECT_NE(outcomes[0].message.find("rank 1"), std::string::npos) << all;
  EXPECT_LT(outcomes[0].seconds - killed_at, options.comm_timeout_s) << all;
}

}  // namespace
}  // namespace h2::train
