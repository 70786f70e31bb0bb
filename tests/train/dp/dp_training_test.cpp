// Data-parallel training in real processes (forked ranks joined through UCX on loopback):
// - 2 ranks x 1 micro-batch match 1 process x 2 micro-batches of the same global batch at every
//   step (loss, evaluation loss, final parameters), in FP32;
// - a run checkpointed by 2 ranks resumes in 1 process (and one checkpointed by 1 process in 2
//   ranks) and ends where the uninterrupted run ends (resharding);
// - a corrupted checkpoint file stops the resume with a message naming it.
// Every training runs in a forked child (a process that used OpenMP must not fork workers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "multiproc.h"
#include "support/training_runs.h"
#include "train/checkpoint/checkpoint.h"
#include "train/trainer.h"

namespace h2::train {
namespace {

namespace fs = std::filesystem;
using comm::testing::describe;
using comm::testing::RankContext;
using comm::testing::run_ranks;
using namespace testing;

// Data parallel when ranks > 1; a plain single process when 1.
void train(config::TrainConfig cfg, int ranks) {
  cfg.parallel.mode = ranks > 1 ? config::ParallelMode::dp : config::ParallelMode::single;
  train_on_ranks(cfg, ranks);
}

// Parameters cannot be compared to the 1e-5 of the losses: one process adds its second
// micro-batch's gradient inside the GEMM (beta = 1), data parallelism adds two rounded products,
// and AdamW's normalised update (about lr per element, whatever the gradient's size) turns
// last-bit differences of near-zero gradients into differences of up to ~1e-4 of a tensor's
// scale after 20 steps. kParamTolerance bounds that; a wrong shard or a missing reduction moves
// parameters by far more (and the losses by more than 1e-5).
constexpr double kParamTolerance = 1e-3;

TEST(DataParallel, TwoRanksMatchOneProcessAccumulatingTheSameGlobalBatch) {
  const fs::path dir = fresh_dir("h2_dp_equivalence");
  config::TrainConfig single = small_config(dir);
  single.train.grad_accum = 2;
  single.log.metrics_file = (dir / "single.jsonl").string();
  single.checkpoint.dir = (dir / "single").string();
  train(single, 1);

  config::TrainConfig dp = small_config(dir);
  dp.train.grad_accum = 1;
  dp.log.metrics_file = (dir / "dp.jsonl").string();
  dp.checkpoint.dir = (dir / "dp").string();
  train(dp, 2);

  const Curve a = read_metrics(dir / "dp.jsonl"), b = read_metrics(dir / "single.jsonl");
  ASSERT_EQ(b.loss.size(), 20u);
  expect_close(a.loss, b.loss, "training loss");
  expect_close(a.eval_loss, b.eval_loss, "evaluation loss");
  EXPECT_LE(max_relative_difference(newest_checkpoint(dp.checkpoint.dir),
                                    newest_checkpoint(single.checkpoint.dir)),
            kParamTolerance);
  // The two ranks wrote one file each; the single process one.
  auto manifest = checkpoint::CheckpointReader(newest_checkpoint(dp.checkpoint.dir)).manifest();
  EXPECT_EQ(manifest.world_size, 2);
  EXPECT_EQ(manifest.files.size(), 2u);
}

TEST(DataParallel, CheckpointsResumeAtAnotherWorldSize) {
  const fs::path dir = fresh_dir("h2_dp_reshard");
  config::TrainConfig reference = small_config(dir);
  reference.train.grad_accum = 2;
  reference.checkpoint.dir = (dir / "reference").string();
  reference.log.metrics_file = (dir / "reference.jsonl").string();
  train(reference, 1);
  const std::string want = newest_checkpoint(reference.checkpoint.dir);

  // 2 ranks for 10 steps, then 1 process (2 micro-batches) for the other 10.
  config::TrainConfig first = small_config(dir);
  first.train.grad_accum = 1;
  first.checkpoint.dir = (dir / "two_then_one").string();
  first.checkpoint.every = 10;
  first.checkpoint.keep_last = 0;
  first.log.metrics_file = (dir / "two_then_one.jsonl").string();
  train(first, 2);
  fs::remove_all(fs::path(first.checkpoint.dir) / "step_000020");  // as if it died after step 10
  config::TrainConfig second = first;
  second.train.grad_accum = 2;
  second.checkpoint.resume = true;
  train(second, 1);
  EXPECT_LE(max_relative_difference(newest_checkpoint(second.checkpoint.dir), want),
            kParamTolerance);
  const Curve resumed = read_metrics(dir / "two_then_one.jsonl");
  const Curve whole = read_metrics(dir / "reference.jsonl");
  expect_close(resumed.loss, whole.loss, "loss of 2 ranks then 1 process");

  // And the other way: 1 process for 10 steps, then 2 ranks.
  config::TrainConfig one = small_config(dir);
  one.train.grad_accum = 2;
  one.checkpoint.dir = (dir / "one_then_two").string();
  one.checkpoint.every = 10;
  one.checkpoint.keep_last = 0;
  train(one, 1);
  fs::remove_all(fs::path(one.checkpoint.dir) / "step_000020");
  config::TrainConfig two = one;
  two.train.grad_accum = 1;
  two.checkpoint.resume = true;
  train(two, 2);
  EXPECT_LE(max_relative_difference(newest_checkpoint(two.checkpoint.dir), want), kParamTolerance);
}

TEST(DataParallel, ACorruptedShardStopsTheResumeNamingTheFile) {
  const fs::path dir = fresh_dir("h2_dp_corrupt");
  config::TrainConfig cfg = small_config(dir);
  cfg.train.steps = 4;
  cfg.checkpoint.dir = (dir / "run").string();
  train(cfg, 2);
  const fs::path shard = fs::path(newest_checkpoint(cfg.checkpoint.dir)) / "rank_00001.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x55');
  }
  cfg.train.steps = 8;
  cfg.checkpoint.resume = true;
  cfg.parallel.mode = config::ParallelMode::dp;
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Trainer trainer(
        cfg, ctx.runtime, [](const std::string&) {}, ctx.comm());
    trainer.run();
  });
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.exit_code, 1) << describe(outcomes);
    EXPECT_NE(o.message.find(shard.string()), std::string::npos) << describe(outcomes);
  }
}

}  // namespace
}  // namespace h2::train
