// Background checkpoint saves (train/checkpoint/async_save.h): the file holds the state as it was
// when the save began, whatever training does to it afterwards (the sources are read once, before
// the constructor returns); the folder equals a synchronous save's byte for byte; a save dropped
// before finish() or a writer killed at any moment never leaves anything but complete
// checkpoints; a failed write is reported by finish().
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "tests/train/checkpoint/numbered_tensor.h"
#include "tests/train/checkpoint/writer_kills.h"
#include "train/checkpoint/async_save.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;
using test::fresh_dir;
using test::numbered;

// One whole tensor "w" read from `live` (the training state) by a source that counts its reads.
RankContents contents_of(const StoredTensor& live, int* reads) {
  TensorSource source = stored_source("", live);
  source.write = [&live, reads](ByteSink& sink) {
    ++*reads;
    sink(live.bytes.data(), live.bytes.size());
  };
  return {{{"w", live.dtype, live.shape, 0, live.shape[0], source}}, {}};
}

void wait_until_written(const AsyncSave& save) {
  while (!save.written()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(AsyncSave, WritesTheStateAsItWasWhenTheSaveBegan) {
  const fs::path dir = fresh_dir("h2_async_save_snapshot");
  StoredTensor live = numbered(256, 1024, 1);
  int reads = 0;
  AsyncSave save(nullptr, dir.string(), {4, 17, "model: {}\n", 1}, contents_of(live, &reads), 0);
  EXPECT_EQ(reads, 1) << "the state must be read before the constructor returns";
  live = numbered(256, 1024, 2);  // the next optimizer step
  const std::string written = save.finish();
  EXPECT_EQ(reads, 1) << "the state was read again while the file was written";
  EXPECT_EQ(written, (dir / "step_000004").string());
  EXPECT_EQ(read_model_tensors(written).at("w").bytes, numbered(256, 1024, 1).bytes);
  EXPECT_EQ(read_trainer_state(written).sampler_position, 17u);
  EXPECT_EQ(save.snapshot_bytes(), 256 * 1024 * 4);
}

TEST(AsyncSave, TheFolderEqualsASynchronousSavesByteForByte) {
  const fs::path sync_dir = fresh_dir("h2_async_save_sync"), async_dir = fresh_dir("h2_async_save");
  const StoredTensor w = numbered(300, 70, 3), m = numbered(300, 70, 4);
  const TrainerState state{9, 40, "model: {dim: 70}\n", 1};
  save_checkpoint(sync_dir.string(), state, {{"w", w}}, {{"m/w", m}}, 0);
  RankContents mine{{{"w", w.dtype, w.shape, 0, 300, stored_source("", w)}},
                    {{"m/w", m.dtype, m.shape, 0, 300, stored_source("", m)}}};
  AsyncSave save(nullptr, async_dir.string(), state, mine, 0);
  save.finish();
  for (const char* file : {"rank_00000.safetensors", "trainer.json", "manifest.json"})
    EXPECT_EQ(read_file((sync_dir / "step_000009" / file).string()),
              read_file((async_dir / "step_000009" / file).string()))
        << file;
}

// Dropped before finish() (an exception in the training step): the save stops, the previous
// checkpoint stays the newest, and only the .tmp folder is left for the next run to tidy.
TEST(AsyncSave, ASaveDroppedBeforeItsFinishLeavesThePreviousCheckpoint) {
  const fs::path dir = fresh_dir("h2_async_save_dropped");
  const std::string previous =
      save_checkpoint(dir.string(), {1, 0, "", 1}, {{"w", numbered(4, 4)}}, {}, 0);
  StoredTensor live = numbered(1024, 4096, 2);
  int reads = 0;
  { AsyncSave save(nullptr, dir.string(), {2, 0, "", 1}, contents_of(live, &reads), 0); }
  EXPECT_EQ(latest_checkpoint(dir.string()), previous);
  EXPECT_FALSE(fs::exists(dir / "step_000002"));
  EXPECT_TRUE(fs::exists(dir / ".tmp_step_000002"));
}

TEST(AsyncSave, AFailedWriteIsReportedByFinish) {
  const fs::path dir = fresh_dir("h2_async_save_failed");
  StoredTensor live = numbered(64, 64);
  int reads = 0;
  AsyncSave save(nullptr, dir.string(), {3, 0, "", 1}, contents_of(live, &reads), 0);
  wait_until_written(save);
  fs::remove_all(dir / ".tmp_step_000003");  // the folder vanished under the writer
  EXPECT_THROW(save.finish(), Error);
  EXPECT_FALSE(latest_checkpoint(dir.string()).has_value());
}

// The kill-at-any-moment test of checkpoint_test.cpp with background saves: a child trains (the
// state changes right after each save begins) and saves every step in the background; the parent
// kills it with SIGKILL at varying moments (during a copy, a write, a finish). The newest complete
// checkpoint must hold exactly the state of its own step.
TEST(AsyncSave, AWriterKilledAtAnyMomentLeavesTheLastCompleteCheckpoint) {
  const fs::path dir = fresh_dir("h2_async_save_kill");
  test::expect_kills_leave_complete_checkpoints(dir, [&](int64_t first) {
    StoredTensor live = numbered(1024, 4096, float(first));
    int reads = 0;
    for (int64_t step = first;; ++step) {
      AsyncSave save(nullptr, dir.string(), {step, 0, "", 1}, contents_of(live, &reads), 2);
      live = numbered(1024, 4096, float(step + 1));  // training goes on
      wait_until_written(save);
      save.finish();
    }
  });
}

}  // namespace
}  // namespace h2::checkpoint
