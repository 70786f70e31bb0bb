// What a training run checks and says before it trains (see start_checks.h).
#include "train/start_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "parallel/exact_gather.h"
#include "train/checkpoint/durable_io.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/step_folders.h"

namespace h2::train {

std::unique_ptr<checkpoint::CheckpointDir> open_outputs(
    const config::TrainConfig& cfg, int rank, bool dry_run,
    const std::function<void(const std::string&)>& print) {
  if (rank != 0) return nullptr;
  if (dry_run) {  // the same checks, creating nothing
    for (const auto& [key, path, folder] :
         {std::tuple{"log.metrics_file", cfg.log.metrics_file, false},
          std::tuple{"log.trace_file", cfg.log.trace_file, false},
          std::tuple{"checkpoint.dir", cfg.checkpoint.dir, true}})
      if (!path.empty()) checkpoint::check_could_write(path, cfg.origin_of(key), folder);
    return nullptr;
  }
  if (!cfg.log.metrics_file.empty())
    checkpoint::check_writable_file(cfg.log.metrics_file, cfg.origin_of("log.metrics_file"));
  if (!cfg.log.trace_file.empty())
    checkpoint::check_writable_file(cfg.log.trace_file, cfg.origin_of("log.trace_file"));
  if (cfg.checkpoint.dir.empty()) return nullptr;
  return std::make_unique<checkpoint::CheckpointDir>(cfg.checkpoint.dir,
                                                     cfg.origin_of("checkpoint.dir"), print);
}

std::string job_fingerprint(const std::string& token) {
  if (token.empty()) return {};
  return checkpoint::checksum_hex(checkpoint::checksum(std::as_bytes(std::span(token))));
}

void check_ranks_agree(comm::Communicator& job, Device& cpu,
                       const std::optional<std::string>& latest, const std::string& dir) {
  if (job.size() == 1) return;
  const auto step_of = [](const std::optional<std::string>& folder) -> double {
    if (!folder) return -1;
    return double(
        checkpoint::step_of_folder(std::filesystem::path(*folder).filename().string()).value());
  };
  const auto describe = [](double step) {
    return step < 0 ? std::string("none") : checkpoint::step_folder_name(int64_t(step));
  };
  const std::vector<std::vector<double>> steps =
      parallel::gather_doubles(job, cpu, {step_of(latest)});
  for (size_t r = 1; r < steps.size(); ++r)
    if (steps[r][0] != steps[0][0])
      H2_THROW(Error,
               "ranks see different newest checkpoints in '{}': rank 0 {}, rank {} {}; a shared "
               "filesystem's listing may be stale on one node",
               dir, describe(steps[0][0]), r, describe(steps[r][0]));
}

std::string other_windows_warning(const checkpoint::TrainerState& saved, const std::string& folder,
                                  const config::TrainConfig& now, int64_t train_tokens) {
  if (saved.sampler_position == 0) return {};  // nothing drawn yet (h2 import): no windows differ
  std::vector<std::string> changed;
  if (saved.train_tokens >= 0 && saved.train_tokens != train_tokens)
    changed.push_back(
        fmt::format("{} training tokens then, {} now", saved.train_tokens, train_tokens));
  std::optional<config::TrainConfig> then;
  try {
    then = config::parse_yaml(saved.config_yaml, folder + "/" + checkpoint::kTrainerState);
  } catch (const ConfigError&) {
    // Written by another version: its keys cannot be compared, its tokens were.
  }
  auto compare = [&](std::string_view key, const auto& before, const auto& current) {
    if (before != current)
      changed.push_back(fmt::format("{} {} then, {} now", key, before, current));
  };
  if (then) {
    compare("data.path", then->data.path, now.data.path);
    compare("data.val_path", then->data.val_path, now.data.val_path);
    compare("data.val_fraction", then->data.val_fraction, now.data.val_fraction);
    compare("model.seq_len", then->model.seq_len, now.model.seq_len);
    compare("train.batch_size", then->train.batch_size, now.train.batch_size);
    compare("train.grad_accum", then->train.grad_accum, now.train.grad_accum);
    compare("train.seed", then->train.seed, now.train.seed);
  }
  if (changed.empty()) return {};
  return fmt::format(
      "warning: the run that wrote {} drew other windows: {}; this one continues at its sampler "
      "position, so its batches differ from an uninterrupted run's",
      folder, fmt::join(changed, "; "));
}

std::string earlier_checkpoints_warning(const config::TrainConfig& config) {
  const std::optional<std::string> earlier = checkpoint::latest_checkpoint(config.checkpoint.dir);
  if (!earlier) return {};
  return fmt::format(
      "checkpoint: warning: {} already holds checkpoints of an earlier run, up to {}; this run "
      "starts afresh (checkpoint.resume is false) and saves beside them, checkpoint.keep_last "
      "pruning the earlier run's lower steps with its own; a later checkpoint.resume takes the "
      "newest step of either run (an h2run restart, only this job's)",
      config.checkpoint.dir, *earlier);
}

std::string long_warmup_warning(const config::TrainConfig& config) {
  const config::TrainOptions& t = config.train;
  if (t.warmup_steps <= t.steps) return {};
  return fmt::format(
      "warning: train.warmup_steps = {} ({}) is more than train.steps = {} ({}): the learning "
      "rate rises to {:.3g} at the last step and never reaches train.lr = {:.3g}",
      t.warmup_steps, config.origin_of("train.warmup_steps"), t.steps,
      config.origin_of("train.steps"), t.lr * double(t.steps) / double(t.warmup_steps), t.lr);
}

}  // namespace h2::train
