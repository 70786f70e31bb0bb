// The trainer's background checkpoint saves (checkpoint.async): at most one save in flight
// (checkpoint/async_save.h), the host memory its copy reuses from one save to the next, that
// memory prepared from the start of the run, and the collective agreement on when a save is
// written everywhere, so that every rank finishes it after the same step.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/device.h"
#include "train/checkpoint/async_save.h"

namespace h2::train {

class BackgroundSaves {
 public:
  // `cpu`: where the small gathers of pending_written() run.
  BackgroundSaves(comm::Communicator& job, Device& cpu) : job_(job), cpu_(cpu) {}

  // Whether a run from `first_step` to `steps` with a checkpoint every `every` steps saves in the
  // background at least once (the last step's save is always synchronous).
  static bool will_save(int64_t first_step, int64_t steps, int64_t every) {
    return every > 0 && (first_step / every + 1) * every < steps;
  }
  // Maps and touches the first copy's memory on a low-priority thread (host_buffer.h).
  void prepare(const checkpoint::RankContents& mine);

  // Finishes the save in flight, if any, then copies `mine` and starts writing it (collective).
  // Returns what finish() returned for the previous one (empty: none was pending).
  std::string start(const std::string& dir, const checkpoint::TrainerState& state,
                    const checkpoint::RankContents& mine, int64_t keep_last);
  bool pending() const { return save_ != nullptr; }
  // Every rank's write of the pending save is done (collective when the job has several ranks).
  bool pending_written();
  // Completes the pending save, if any (collective; waits for every rank's write) and returns
  // the line to print ("checkpoint: DIR (...)"), empty when none was pending. `now`: the step
  // just completed (-1: not at a step).
  std::string finish(int64_t now = -1);

 private:
  comm::Communicator& job_;
  Device& cpu_;
  std::unique_ptr<checkpoint::AsyncSave> save_;
  checkpoint::HostBuffer memory_;              // kept from one save to the next
  std::future<checkpoint::HostBuffer> ready_;  // the first, prepared meanwhile
};

}  // namespace h2::train
