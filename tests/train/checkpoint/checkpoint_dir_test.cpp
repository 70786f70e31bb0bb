// The checkpoint folder of a run, checked before any work: a file in its place or an unwritable
// output is refused naming it; a second trainer on the same folder is refused naming the first;
// what a kill left behind is tidied (a finished save renamed into place, unfinished saves and
// half-pruned folders removed) and a suspicious newest folder is reported, each with a log line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/manifest.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  return dir;
}

bool any_line_has(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& line : lines)
    if (line.find(part) != std::string::npos) return true;
  return false;
}

TEST(CheckpointDir, AFileInItsPlaceIsRefusedNamingTheOrigin) {
  const fs::path file = fresh_dir("h2_ckdir_file");
  std::ofstream(file) << "x";
  try {
    CheckpointDir dir(file.string(), "checkpoint.dir (job.yaml:7)", [](const std::string&) {});
    FAIL() << "a file was taken for a checkpoint folder";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  fs::remove(file);
}

// flock locks belong to an open file description, so a second holder in this very process
// conflicts exactly as a second process would.
TEST(CheckpointDir, ASecondTrainerIsRefusedNamingTheFirst) {
  const fs::path path = fresh_dir("h2_ckdir_lock");
  auto quiet = [](const std::string&) {};
  {
    CheckpointDir first(path.string(), "checkpoint.dir", quiet);
    try {
      CheckpointDir second(path.string(), "checkpoint.dir", quiet);
      FAIL() << "two trainers hold one checkpoint folder";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("in use by another h2 train"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("pid {}", getpid())), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(CheckpointDir(path.string(), "checkpoint.dir", quiet))
      << "the lock outlived its holder";
}

TEST(CheckpointDir, WhatAKillLeftBehindIsTidied) {
  const fs::path path = fresh_dir("h2_ckdir_tidy");
  const TensorMap model{{"w", StoredTensor{DType::f32, Shape{2}, std::vector<std::byte>(8)}}};
  save_checkpoint(path.string(), {5, 5, "", 1}, model, {}, 0);
  save_checkpoint(path.string(), {7, 7, "", 1}, model, {}, 0);
  fs::rename(path / "step_000007", path / ".tmp_step_000007");  // killed before its rename
  fs::create_directories(path / ".tmp_step_000008");            // killed while writing
  std::ofstream(path / ".tmp_step_000008" / "rank_00000.safetensors") << "partial";
  fs::create_directories(path / "step_000002");  // killed while pruning: manifest gone first
  std::ofstream(path / "step_000002" / "rank_00000.safetensors") << "left";
  fs::create_directories(path / "step_000009");  // newer than any checkpoint: not ours to remove

  std::vector<std::string> log;
  CheckpointDir dir(path.string(), "checkpoint.dir",
                    [&](const std::string& l) { log.push_back(l); });
  EXPECT_TRUE(fs::exists(path / "step_000007" / kManifest));
  EXPECT_FALSE(fs::exists(path / ".tmp_step_000007"));
  EXPECT_FALSE(fs::exists(path / ".tmp_step_000008"));
  EXPECT_FALSE(fs::exists(path / "step_000002"));
  EXPECT_TRUE(fs::exists(path / "step_000009"));
  EXPECT_EQ(latest_checkpoint(path.string()), (path / "step_000007").string());
  EXPECT_EQ(read_trainer_state((path / "step_000007").string()).step, 7);
  EXPECT_TRUE(any_line_has(log, "step_000007")) << fmt::format("{}", fmt::join(log, "\n"));
  EXPECT_TRUE(any_line_has(log, "removed " + (path / ".tmp_step_000008").string()));
  EXPECT_TRUE(any_line_has(log, "removed " + (path / "step_000002").string()));
  EXPECT_TRUE(any_line_has(log, "warning: " + (path / "step_000009").string()));
  EXPECT_EQ(log.size(), 4u) << fmt::format("{}", fmt::join(log, "\n"));
}

TEST(CheckpointDir, OutputFilesAreCheckedWithoutLeavingAnyBehind) {
  const fs::path path = fresh_dir("h2_ckdir_outputs");
  const fs::path metrics = path / "logs" / "metrics.jsonl";
  check_writable_file(metrics.string(), "log.metrics_file");
  EXPECT_FALSE(fs::exists(metrics)) << "the check left an empty file";
  EXPECT_TRUE(fs::is_directory(metrics.parent_path()));
  std::ofstream(metrics) << "kept\n";
  check_writable_file(metrics.string(), "log.metrics_file");
  EXPECT_EQ(fs::file_size(metrics), 5u) << "the check truncated an existing file";
  for (const std::string& bad : {std::string("/proc/h2-no-such/trace.json"), path.string()}) {
    try {
      check_writable_file(bad, "log.trace_file (job.yaml:3)");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("job.yaml:3"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace h2::checkpoint
