// Checkpoint saves that overlap training (`checkpoint.async: true`, as torch DCP's async save).
// The constructor copies this rank's share into host memory (the snapshot: the training state may
// change as soon as it returns) and starts a thread that writes it to DIR/.tmp_step_NNNNNN while
// training goes on. finish() completes the save collectively (trainer.json, the manifest, the
// rename, keep_last) once every rank's file is on the disk. Atomicity and checksums are those of a
// synchronous save (checkpoint.h): a crash or kill before finish() leaves only the .tmp folder,
// and the previous checkpoint stays the newest complete one. The price is one copy of the rank's
// share in host memory, which the caller passes from one save to the next (host_buffer.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>

#include "comm/communicator.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/host_buffer.h"

namespace h2::checkpoint {

// The bytes an AsyncSave of `mine` copies (the HostBuffer it needs).
size_t snapshot_bytes_needed(const RankContents& mine);

class AsyncSave {
 public:
  // Collective over `group` (nullptr: a single process), like save_checkpoint. `mine`'s sources
  // are read here, before it returns, and never again. The copy goes into `memory` when it is
  // large enough (a previous save's, from take_memory()), else into a new buffer.
  AsyncSave(comm::Communicator* group, std::string dir, TrainerState state,
            const RankContents& mine, int64_t keep_last, HostBuffer memory = {});
  // Stops an unfinished write at its next 16 MiB and joins the thread: the .tmp folder stays,
  // never a checkpoint (the next run's CheckpointDir removes it).
  ~AsyncSave();
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;

  // This rank's file and sidecar are written, or the write failed (finish() reports it).
  bool written() const { return written_.load(std::memory_order_acquire); }
  // Collective; every rank calls it after its own written() (the trainer agrees on that first).
  // Waits for this rank's write, rethrows its error, then finish_save. Returns the folder.
  std::string finish();
  // After finish(): the snapshot's memory, for the next save.
  HostBuffer take_memory();

  int64_t step() const { return state_.step; }
  int64_t snapshot_bytes() const { return snapshot_bytes_; }
  double snapshot_seconds() const { return snapshot_seconds_; }  // the copy's wall time

 private:
  void write(const std::string& tmp_dir, int rank);

  comm::Communicator* group_;
  std::string dir_;
  TrainerState state_;
  int64_t keep_last_;
  HostBuffer memory_;  // the snapshot; contents_' sources read from it
  RankContents contents_;
  int64_t snapshot_bytes_ = 0;
  double snapshot_seconds_ = 0;
  bool finished_ = false;
  std::atomic<bool> written_{false};
  std::atomic<bool> cancel_{false};
  std::exception_ptr error_;  // set by the writer before written_
  std::thread writer_;
};

}  // namespace h2::checkpoint
