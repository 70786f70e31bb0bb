// What a training run checks and says before it trains: its outputs (writable, the checkpoint
// folder held and tidied), which launcher job wrote a checkpoint, whether every rank found the same
// one to resume, whether the resumed run draws other windows than the run that wrote it, and the
// warnings of a fresh run beside an earlier run's checkpoints and of a warm-up longer than the
// run. Each warning is a line to print, empty when there is nothing to say.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "core/device.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/config/config.h"

namespace h2::train {

// Rank 0 checks every output before any work: the metrics and trace files can be written, and
// the checkpoint folder is a writable folder that this run holds alone (tidied of crash debris,
// each tidied folder a line to `print`). A dry run checks the same, creating nothing. Other
// ranks, dry runs and runs without checkpoint.dir get nullptr.
std::unique_ptr<checkpoint::CheckpointDir> open_outputs(
    const config::TrainConfig& cfg, int rank, bool dry_run,
    const std::function<void(const std::string&)>& print);

// Which launcher job this is (TrainerState::job): a fingerprint of H2_JOB_TOKEN (its XXH3, never
// the secret), the same on every rank and across h2run's restarts; empty outside a launcher's job.
std::string job_fingerprint(const std::string& token);

// Every rank found the same newest checkpoint `latest` in `dir` (collective over `job`, gathered
// through `cpu`): each lists the folder itself, and a shared filesystem's stale listing on one
// node would have it load another step. Error naming both steps otherwise.
void check_ranks_agree(comm::Communicator& job, Device& cpu,
                       const std::optional<std::string>& latest, const std::string& dir);

// The sampler's position counts windows of the training data, drawn by seed, length and batch. A
// resume from `saved` (in `folder`) whose data (`train_tokens` now) or window keys changed
// continues at that position among other windows: said (not refused: data may grow on purpose),
// since its batches then differ from an uninterrupted run's.
std::string other_windows_warning(const checkpoint::TrainerState& saved, const std::string& folder,
                                  const config::TrainConfig& now, int64_t train_tokens);

// A fresh run (checkpoint.resume false) into a folder holding an earlier run's checkpoints.
std::string earlier_checkpoints_warning(const config::TrainConfig& config);

// train.warmup_steps above train.steps: the learning rate never reaches train.lr.
std::string long_warmup_warning(const config::TrainConfig& config);

}  // namespace h2::train
