// Background checkpoint saves of a training run (see background_saves.h).
#include "train/background_saves.h"

#include <fmt/format.h>

#include <utility>

#include "parallel/exact_gather.h"

namespace h2::train {

void BackgroundSaves::prepare(const checkpoint::RankContents& mine) {
  ready_ = checkpoint::prepare_host_buffer(checkpoint::snapshot_bytes_needed(mine));
}

std::string BackgroundSaves::start(const std::string& dir, const checkpoint::TrainerState& state,
                                   const checkpoint::RankContents& mine, int64_t keep_last) {
  std::string previous = finish();
  if (ready_.valid()) memory_ = ready_.get();
  save_ = std::make_unique<checkpoint::AsyncSave>(&job_, dir, state, mine, keep_last,
                                                  std::move(memory_));
  return previous;
}

bool BackgroundSaves::pending_written() {
  if (job_.size() == 1) return save_->written();
  bool all = true;
  for (const auto& rank : parallel::gather_doubles(job_, cpu_, {save_->written() ? 1.0 : 0.0}))
    all = all && rank[0] != 0;
  return all;
}

std::string BackgroundSaves::finish(int64_t now) {
  if (!save_) return "";
  const std::string where = save_->finish();
  const int64_t first = save_->step() + 1;  // the first step that ran during the write
  const std::string during = now < 0        ? ""
                             : now == first ? fmt::format(" during step {}", now)
                                            : fmt::format(" during steps {}-{}", first, now);
  const std::string line = fmt::format(
      "checkpoint: {} ({:.0f} MiB copied in {:.2f} s, then written in the background{})", where,
      double(save_->snapshot_bytes()) / (1 << 20), save_->snapshot_seconds(), during);
  memory_ = save_->take_memory();
  save_.reset();
  return line;
}

}  // namespace h2::train
