// `h2 train` under h2run, end to end with real processes: a data-parallel job whose rank is
// killed with SIGKILL mid-run is stopped and reported by h2run; with --max-restarts 1 the job
// resumes from its newest checkpoint and ends with the loss of an uninterrupted run; SIGTERM to
// h2run or to mpirun mid-run stops every rank after one step with a checkpoint there (exit 143
// within the grace period), and the resumed run's losses are the uninterrupted run's; the
// mixed-cluster pipeline config of the README's main job trains.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
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

// `h2 train` on a small data-parallel model, 30 steps, log every step, checkpoints every
// `checkpoint_every` steps (and at the end) in DIR/ckpt, metrics in DIR/metrics.jsonl.
std::vector<std::string> train_command(const std::string& dir, int checkpoint_every = 5) {
  std::vector<std::string> args;
  for (const char* a : {H2_PATH,
                        "train",
                        H2_SOURCE_DIR "/configs/train/tiny.yaml",
                        "--set",
                        "parallel.mode=dp",
                        "--set",
                        "model.dim=32",
                        "--set",
                        "model.n_layers=2",
                        "--set",
                        "model.n_kv_heads=2",
                        "--set",
                        "model.ffn_dim=64",
                        "--set",
                        "model.seq_len=32",
                        "--set",
                        "train.batch_size=4",
                        "--set",
                        "train.steps=30",
                        "--set",
                        "train.warmup_steps=3",
                        "--set",
                        "train.eval_every=0",
                        "--set",
                        "log.every=1",
                        "--set",
                        "checkpoint.keep_last=0"})
    args.push_back(a);
  args.push_back("--set");
  args.push_back("checkpoint.every=" + std::to_string(checkpoint_every));
  args.push_back("--set");
  args.push_back("checkpoint.dir=" + dir + "/ckpt");
  args.push_back("--set");
  args.push_back("log.metrics_file=" + dir + "/metrics.jsonl");
  return args;
}

// h2run -n 2 [extra] -- train_command(dir).
std::vector<std::string> train_job(const std::string& dir, std::vector<std::string> extra = {},
                                   int checkpoint_every = 5) {
  std::vector<std::string> args = {"-n", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  for (const std::string& a : train_command(dir, checkpoint_every)) args.push_back(a);
  return args;
}

// Loss per step of a metrics file (a resumed run's later lines win).
std::map<int64_t, double> losses(const std::string& path) {
  std::map<int64_t, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "step") out[j["step"]] = j["loss"];
  }
  return out;
}

// The records of one event in a metrics file, in order.
std::vector<nlohmann::json> records(const std::string& path, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == event) out.push_back(j);
  }
  return out;
}

// Waits up to 60 s until the metrics file logged step `step`.
void wait_for_step(const std::string& metrics, int64_t step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(metrics)) {
      const auto steps = records(metrics, "step");
      if (!steps.empty() && steps.back()["step"] >= step) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << metrics << " never reached step " << step;
}

// The pid of the process whose environment holds H2_JOB_TOKEN=token and H2_RANK=rank (h2run) or
// OMPI_COMM_WORLD_RANK=rank (mpirun).
int rank_pid(const std::string& token, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string rank_is = std::to_string(rank) + '\0';
    if (env.find("H2_JOB_TOKEN=" + token + '\0') != std::string::npos &&
        (env.find("H2_RANK=" + rank_is) != std::string::npos ||
         env.find("OMPI_COMM_WORLD_RANK=" + rank_is) != std::string::npos))
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

// A job stopped by SIGTERM after step 3 (`send_stop`) exits 143 within the grace period with a
// checkpoint at the step it stopped after (none other: checkpoint.every is beyond the run), says
// so in a stop record; resumed, it ends with the uninterrupted run's losses.
void expect_graceful_stop(const std::string& dir, H2runProcess& job,
                          const std::function<void()>& send_stop, double grace_s,
                          const std::map<int64_t, double>& want,
                          const std::vector<std::string>& resume_job,
                          const std::vector<std::string>& env, const std::string& launcher) {
  wait_for_step(dir + "/metrics.jsonl", 3);
  const auto signalled = std::chrono::steady_clock::now();
  send_stop();
  const RunResult r = job.wait(120);
  const double stop_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_LT(stop_s, grace_s) << "the ranks did not stop within the grace period";
  const auto stops = records(dir + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u) << r.out << r.err;
  const int64_t stopped_after = stops[0]["step"];
  EXPECT_GE(stopped_after, 3);
  EXPECT_LT(stopped_after, 30) << "the job ran to its end: the stop came too late to test";
  EXPECT_EQ(stops[0]["signal"], "SIGTERM");
  const std::string checkpoint = stops[0]["checkpoint"];
  EXPECT_TRUE(fs::exists(checkpoint + "/manifest.json")) << checkpoint;
  EXPECT_NE(checkpoint.find(fmt::format("step_{:06}", stopped_after)), std::string::npos)
      << checkpoint;
  EXPECT_TRUE(records(dir + "/metrics.jsonl", "done").empty());

  H2runProcess resumed(resume_job, env, launcher);
  const RunResult rest = resumed.wait(120);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from"), std::string::npos) << rest.out;
  const auto got = losses(dir + "/metrics.jsonl");
  ASSERT_EQ(got.size(), 30u);
  for (const auto& [step, loss] : want)
    EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << "step " << step;
  const auto resumes = records(dir + "/metrics.jsonl", "resume");
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0]["step"], stopped_after);
}

std::map<int64_t, double> uninterrupted_losses(const std::string& dir) {
  RunResult reference = run_h2run(train_job(dir), job_env(token_of(dir)), 120);
  EXPECT_EQ(reference.exit_code, 0) << reference.err;
  return losses(dir + "/metrics.jsonl");
}

// An h2run job stopped by `send_stop(job, dir)`, as expect_graceful_stop checks it, with the
// uninterrupted run's losses as the reference and a resume by h2run again.
void expect_h2run_job_stops_gracefully(
    const std::function<void(H2runProcess& job, const std::string& dir)>& send_stop) {
  TempDir whole, dir;
  const auto want = uninterrupted_losses(whole.path());
  ASSERT_EQ(want.size(), 30u);
  const auto env = job_env(token_of(dir.path()));
  H2runProcess job(train_job(dir.path(), {"--grace", "20"}, 1000), env);
  std::vector<std::string> resume = train_job(dir.path(), {}, 1000);
  resume.insert(resume.end(), {"--set", "checkpoint.resume=true"});
  expect_graceful_stop(
      dir.path(), job, [&] { send_stop(job, dir.path()); }, 20, want, resume, env, H2RUN_PATH);
}

TEST(H2runTraining, SigtermStopsTheJobAfterAStepWithACheckpoint) {
  expect_h2run_job_stops_gracefully(
      [](H2runProcess& job, const std::string&) { ASSERT_EQ(::kill(job.pid(), SIGTERM), 0); });
}

// Slurm's preemption and time limit send SIGTERM to every process of the job step: h2run and
// each rank, which then gets it twice (h2run passes its own on). The repeat is the same stop, not
// a second request to exit at once: the job still stops after a step with a checkpoint.
TEST(H2runTraining, SigtermToTheLauncherAndEveryRankStopsTheJobWithACheckpoint) {
  expect_h2run_job_stops_gracefully([](H2runProcess& job, const std::string& dir) {
    std::vector<int> pids = {job.pid()};
    for (int rank : {0, 1}) pids.push_back(rank_pid(token_of(dir), rank));
    for (int pid : pids) {
      ASSERT_GT(pid, 0);
      ASSERT_EQ(::kill(pid, SIGTERM), 0);
    }
  });
}

// Under mpirun the job's ranks get SIGTERM, as Slurm sends it to every task of a job on
// preemption or at its time limit; mpirun then exits with the ranks' 143. (SIGTERM to mpirun
// itself makes Open MPI kill the ranks odls_base_sigkill_timeout seconds later and exit 1; it
// passes SIGUSR1 on instead: README.)
TEST(H2runTraining, SigtermToAnMpirunJobStopsItAfterAStepWithACheckpoint) {
  if (::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  TempDir whole, dir;
  const auto want = uninterrupted_losses(whole.path());
  ASSERT_EQ(want.size(), 30u);
  std::vector<std::string> run = {"--allow-run-as-root", "--oversubscribe", "-np", "2"};
  for (const char* name :
       {"H2_COMM_TIMEOUT", "UCX_TLS", "UCX_WARN_UNUSED_ENV_VARS", "H2_JOB_TOKEN"})
    run.insert(run.end(), {"-x", name});
  for (const std::string& a : train_command(dir.path(), 1000)) run.push_back(a);
  const auto env = job_env(token_of(dir.path()));
  H2runProcess job(run, env, "mpirun");
  std::vector<std::string> resume = run;
  resume.insert(resume.end(), {"--set", "checkpoint.resume=true"});
  expect_graceful_stop(
      dir.path(), job,
      [&] {
        for (int rank : {0, 1}) {
          const int pid = rank_pid(token_of(dir.path()), rank);
          ASSERT_GT(pid, 0) << "rank " << rank << " not found";
          ASSERT_EQ(::kill(pid, SIGTERM), 0);
        }
      },
      20, want, resume, env, "mpirun");
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
