// Step folders are named and ordered by their step (train/checkpoint/step_folders.h): names past
// six digits, names that are not H2's, and the three places that order folders (pruning by
// keep_last, the newest checkpoint a run resumes from, and the tidying of a kill's debris) across
// step 999,999 -> 1,000,000, where the names' text order and the steps' order part.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/train/checkpoint/numbered_tensor.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/step_folders.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::fresh_dir;
using test::numbered;

std::set<std::string> folders_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory()) names.insert(entry.path().filename().string());
  return names;
}

void save(const fs::path& dir, int64_t step, int64_t keep_last) {
  const TensorMap model{{"w", numbered(2, 3, float(step))}};
  save_checkpoint(dir.string(), {step, uint64_t(step), "", 1}, model, {}, keep_last);
}

TEST(StepFolders, NamesRoundTripAndOnlyStepNamesParse) {
  for (int64_t step :
       {int64_t(0), int64_t(42), int64_t(999999), int64_t(1000000), int64_t(123456789012)}) {
    EXPECT_EQ(step_of_folder(step_folder_name(step)), step) << step_folder_name(step);
    EXPECT_EQ(tmp_step_folder_name(step), "." + std::string("tmp_") + step_folder_name(step));
    EXPECT_EQ(step_of_tmp_folder(tmp_step_folder_name(step)), step);
    EXPECT_EQ(step_of_tmp_folder(step_folder_name(step)), std::nullopt);
  }
  EXPECT_EQ(step_folder_name(42), "step_000042");
  EXPECT_EQ(step_folder_name(1000000), "step_1000000");
  for (const char* other : {"step_", "step_12a", "step_-1", "step_+1", "step_ 1", ".tmp_step_1",
                            "Step_1", "step_99999999999999999999", "steps_1", "step_1/"})
    EXPECT_EQ(step_of_folder(other), std::nullopt) << other;
  EXPECT_EQ(step_of_tmp_folder(".tmp_notes"), std::nullopt);
}

TEST(StepFolders, KeepLastPrunesByStepPastAMillion) {
  const fs::path dir = fresh_dir("h2_step_folders_keep");
  for (int64_t step = 999998; step <= 1000001; ++step) save(dir, step, 2);
  EXPECT_EQ(folders_in(dir), (std::set<std::string>{"step_1000000", "step_1000001"}));
  EXPECT_EQ(latest_checkpoint(dir.string()), (dir / "step_1000001").string());
  EXPECT_EQ(read_trainer_state((dir / "step_1000001").string()).step, 1000001);
  fs::remove_all(dir);
}

// A fresh run in a folder that holds a newer checkpoint of an earlier run: pruning takes only
// this run's older checkpoints, never the one just written.
TEST(StepFolders, PruningLeavesNewerStepsAndTheNewCheckpoint) {
  const fs::path dir = fresh_dir("h2_step_folders_newer");
  save(dir, 5000, 0);
  save(dir, 100, 1);
  EXPECT_EQ(folders_in(dir), (std::set<std::string>{"step_000100", "step_005000"}));
  save(dir, 200, 1);
  EXPECT_EQ(folders_in(dir), (std::set<std::string>{"step_000200", "step_005000"}));
  save(dir, 300, 3);
  save(dir, 400, 3);
  EXPECT_EQ(folders_in(dir),
            (std::set<std::string>{"step_000200", "step_000300", "step_000400", "step_005000"}));
  fs::remove_all(dir);
}

// A kill while pruning step_999999 left it without its manifest; step_1000000 is complete, so
// the leftover is older and removed. A folder whose name is not a step is not H2's to touch.
TEST(StepFolders, TidyingOrdersByStepAndLeavesOtherNames) {
  const fs::path dir = fresh_dir("h2_step_folders_tidy");
  save(dir, 999999, 0);
  save(dir, 1000000, 0);
  fs::remove(dir / "step_999999" / kManifest);
  fs::create_directories(dir / "step_notes");
  std::ofstream(dir / "step_notes" / "readme.txt") << "mine";
  std::vector<std::string> log;
  {
    CheckpointDir opened(dir.string(), "checkpoint.dir",
                         [&](const std::string& l) { log.push_back(l); });
  }
  EXPECT_EQ(folders_in(dir), (std::set<std::string>{"step_1000000", "step_notes"}));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("removed " + (dir / "step_999999").string()), std::string::npos) << log[0];
  fs::remove_all(dir);
}

}  // namespace
}  // namespace h2::checkpoint
