// `h2 train` under h2run, end to end with real processes: a data-parallel job whose rank is
// killed with SIGKILL mid-run is stopped and reported by h2run; with --max-restarts 1 the job
// resumes from its newest checkpoint and ends with the loss of an uninterrupted run; the
// mixed-cluster pipeline config of the README's main job trains.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/h2run/h2run_harness.h"

namespace h2::testing {
namespace {

namespace fs = std::filesystem;

// The job's environment; its token (unique per job, as tests may run concurrently) also finds
// the job's rank processes.
std::vector<std::string> job_env(const std::string& token) {
  return {"H2_COMM_TIMEOUT=60", "UCX_TLS=sm,self", "UCX_WARN_UNUSED_ENV_VARS=n",
          "H2_JOB_TOKEN=" + token};
}

std::string token_of(const std::string& dir) {
  return "h2run-train-" + fs::path(dir).filename().string();
}

// h2run -n 2 [extra] -- h2 train on a small model, 30 steps, a checkpoint every 5 steps.
std::vector<std::string> train_job(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"-n", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* a : {"--",    H2_PATH,
                        "train", H2_SOURCE_DIR "/configs/train/tiny.yaml",
                        "--set", "parallel.mode=dp",
                        "--set", "model.dim=32",
                        "--set", "model.n_layers=2",
                        "--set", "model.n_kv_heads=2",
                        "--set", "model.ffn_dim=64",
                        "--set", "model.seq_len=32",
                        "--set", "train.batch_size=4",
                        "--set", "train.steps=30",
                        "--set", "train.warmup_steps=3",
                        "--set", "train.eval_every=0",
                        "--set", "log.every=1",
                        "--set", "checkpoint.every=5",
                        "--set", "checkpoint.keep_last=0"})
    args.push_back(a);
  args.push_back("--set");
  args.push_back("checkpoint.dir=" + dir + "/ckpt");
  args.push_back("--set");
  args.push_back("log.metrics_file=" + dir + "/metrics.jsonl");
  return args;
}

// Loss per step of a metrics file (a resumed run's later lines win).
std::map<int64_t, double> losses(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("step")) out[j["step"]] = j["loss"];
  }
  return out;
}

// The pid of the process whose environment holds H2_JOB_TOKEN=token and H2_RANK=rank.
int rank_pid(const std::string& token, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (env.find("H2_JOB_TOKEN=" + token + '\0') != std::string::npos &&
        env.find("H2_RANK=" + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// Starts the job, waits for its checkpoint of step 10, then kills rank 1 with SIGKILL.
RunResult run_and_kill_rank_1(const std::string& dir, std::vector<std::string> extra) {
  H2runProcess job(train_job(dir, extra), job_env(token_of(dir)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(dir + "/ckpt/step_000010/manifest.json") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int victim = rank_pid(token_of(dir), 1);
  EXPECT_GT(victim, 0) << "rank 1 not found";
  if (victim > 0) kill(victim, SIGKILL);
  return job.wait(120);
}

TEST(H2runTraining, AKilledRankStopsTheJobAndIsNamed) {
  TempDir dir;
  RunResult r = run_and_kill_rank_1(dir.path(), {});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
  EXPECT_EQ(rank_pid(token_of(dir.path()), 0), -1) << "rank 0 outlived the job";
  EXPECT_LT(losses(dir.path() + "/metrics.jsonl").size(), 30u) << "the job was not stopped";
}

TEST(H2runTraining, ARestartResumesAndEndsWithTheUninterruptedLoss) {
  TempDir whole;
  RunResult reference = run_h2run(train_job(whole.path()), job_env(token_of(whole.path())), 120);
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const auto want = losses(whole.path() + "/metrics.jsonl");
  ASSERT_EQ(want.size(), 30u);

  TempDir dir;
  RunResult r = run_and_kill_rank_1(dir.path(), {"--max-restarts", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("restarting the job"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  const auto got = losses(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(got.size(), 30u);
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << "step " << step;
}

// The README's main job, shortened: the heterogeneous pipeline config on 4 emulated chips.
TEST(H2runTraining, TheMixedClusterConfigTrains) {
  TempDir dir;
  RunResult r =
      run_h2run({"-n", "4", "--", H2_PATH, "train", H2_SOURCE_DIR "/configs/train/hetero-4.yaml",
                 "--set", "train.steps=3", "--set", "train.eval_every=3", "--set", "log.every=1",
                 "--set", "checkpoint.dir=" + dir.path() + "/ckpt", "--set",
                 "log.metrics_file=" + dir.path() + "/metrics.jsonl"},
                job_env(token_of(dir.path())), 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("groups of 2+2 ranks"), std::string::npos) << r.out;
  const auto got = losses(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_LT(got.at(3), got.at(1)) << "the loss did not fall";

  // The same stages from the plan file (it overrides the config's inline keys).
  TempDir planned;
  RunResult p = run_h2run(
      {"-n", "4", "--", H2_PATH, "train", H2_SOURCE_DIR "/configs/train/hetero-4.yaml", "--set",
       "train.steps=1", "--set", "train.eval_every=0", "--set", "parallel.stage_layers=2,2",
       "--set", "parallel.plan=" H2_SOURCE_DIR "/configs/plans/hetero-4.yaml", "--set",
       "checkpoint.dir=", "--set", "log.metrics_file="},
      job_env(token_of(planned.path())), 300);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("2 stages (embedding+blocks 0-2 | block 3+head) on groups of 2+2 ranks"),
            std::string::npos)
      << p.out;
}

}  // namespace
}  // namespace h2::testing
