// Snapshot, background write, collective finish (see async_save.h).
#include "train/checkpoint/async_save.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace h2::checkpoint {
namespace {

constexpr size_t kChunkBytes = size_t(16) << 20;  // the writer looks for a cancel between chunks
constexpr size_t kAlign = 64;                     // each piece's copy starts on a cache line

struct Cancelled {};

size_t piece_bytes(const OwnedRows& o) {
  return size_t(dtype_storage_bytes(o.local.dtype, o.local.shape.numel()));
}

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

size_t snapshot_bytes_needed(const RankContents& mine) {
  size_t total = 0;
  for (const auto* section : {&mine.model, &mine.optimizer})
    for (const OwnedRows& o : *section)
      if (o.row_end > o.row_begin) total += aligned(piece_bytes(o));
  return total;
}

AsyncSave::AsyncSave(comm::Communicator* group, std::string dir, TrainerState state,
                     const RankContents& mine, int64_t keep_last, HostBuffer memory)
    : group_(group),
      dir_(std::move(dir)),
      state_(std::move(state)),
      keep_last_(keep_last),
      memory_(std::move(memory)) {
  const auto start = std::chrono::steady_clock::now();
  if (const size_t total = snapshot_bytes_needed(mine); memory_.size() < total)
    memory_ = HostBuffer(total);

  // Each piece read once into its place in memory_, then served from there to the writer.
  contents_ = mine;
  size_t offset = 0;
  for (auto* section : {&contents_.model, &contents_.optimizer})
    for (OwnedRows& o : *section) {
      if (o.row_end <= o.row_begin) continue;
      const size_t bytes = piece_bytes(o);
      std::byte* copy = memory_.data() + offset;
      size_t filled = 0;
      ByteSink into_copy = [&](const void* data, size_t n) {
        H2_CHECK(filled + n <= bytes, "checkpoint copy: '{}' gave more than its {} bytes", o.name,
                 bytes);
        std::memcpy(copy + filled, data, n);
        filled += n;
      };
      o.local.write(into_copy);
      H2_CHECK(filled == bytes, "checkpoint copy: '{}' gave {} of its {} bytes", o.name, filled,
               bytes);
      o.local.write = [this, copy, bytes](ByteSink& sink) {
        for (size_t at = 0; at < bytes; at += kChunkBytes) {
          if (cancel_.load(std::memory_order_relaxed)) throw Cancelled{};
          sink(copy + at, std::min(kChunkBytes, bytes - at));
        }
      };
      offset += aligned(bytes);
      snapshot_bytes_ += int64_t(bytes);
    }
  snapshot_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string tmp = begin_save(group_, dir_, state_.step);
  const int rank = group_ != nullptr ? group_->rank() : 0;
  writer_ = std::thread([this, tmp, rank] { write(tmp, rank); });
}

void AsyncSave::write(const std::string& tmp_dir, int rank) {
  // Below the training threads: on a busy host the write waits, not the step.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  try {
    write_rank_share(tmp_dir, rank, contents_);
  } catch (const Cancelled&) {
  } catch (...) {
    error_ = std::current_exception();
  }
  written_.store(true, std::memory_order_release);
}

std::string AsyncSave::finish() {
  if (writer_.joinable()) writer_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  const std::string folder = finish_save(group_, dir_, state_, keep_last_);
  finished_ = true;
  return folder;
}

HostBuffer AsyncSave::take_memory() {
  H2_CHECK(finished_, "AsyncSave::take_memory before finish(): the writer still reads it");
  contents_ = {};
  return std::move(memory_);
}

AsyncSave::~AsyncSave() {
  cancel_.store(true, std::memory_order_relaxed);
  if (writer_.joinable()) writer_.join();
}

}  // namespace h2::checkpoint
