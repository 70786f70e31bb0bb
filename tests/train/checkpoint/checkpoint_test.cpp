// Checkpoint folders without a model: the manifest round trip and its checks, even row shares,
// reading any rows of a tensor split over several writers (resharding), corruption detection
// naming the file, and crash safety: a writer killed at random moments (SIGKILL) never leaves
// anything but complete checkpoints behind.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/train/checkpoint/numbered_tensor.h"
#include "tests/train/checkpoint/writer_kills.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::fresh_dir;
using test::numbered;

StoredTensor rows_of(const StoredTensor& t, int64_t begin, int64_t end) {
  const size_t row = t.bytes.size() / size_t(t.shape[0]);
  StoredTensor out{t.dtype, t.shape, {}};
  out.shape[0] = end - begin;
  out.bytes.assign(t.bytes.begin() + begin * int64_t(row), t.bytes.begin() + end * int64_t(row));
  return out;
}

TEST(EvenRows, SplitsEveryRowOnceLowerRanksFirst) {
  for (int64_t rows : {0, 1, 2, 7, 10})
    for (int ranks : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        auto [b, e] = even_rows(rows, r, ranks);
        EXPECT_EQ(b, next) << rows << " rows, rank " << r << " of " << ranks;
        EXPECT_GE(e - b, rows / ranks);
        EXPECT_LE(e - b, rows / ranks + 1);
        next = e;
      }
      EXPECT_EQ(next, rows);
    }
}

TEST(Manifest, RoundTripsAndRejectsGapsAndUnknownFiles) {
  Manifest m;
  m.step = 12;
  m.world_size = 2;
  m.files["a.safetensors"] = {100, 0x0123456789abcdefULL};
  m.files["b.safetensors"] = {200, 42};
  m.model["w"] = {DType::f32,
                  Shape{5, 3},
                  {{"a.safetensors", "model/w", 0, 2}, {"b.safetensors", "model/w", 2, 5}}};
  m.optimizer["m/w"] = {DType::f32, Shape{5, 3}, {{"a.safetensors", "optimizer/m/w", 0, 5}}};
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "x"), m);

  Manifest gap = m;
  gap.model["w"].pieces[1].row_begin = 3;
  EXPECT_THROW(manifest_from_json(manifest_to_json(gap), "x"), ConfigError);
  Manifest short_cover = m;
  short_cover.model["w"].pieces[1].row_end = 4;
  EXPECT_THROW(manifest_from_json(manifest_to_json(short_cover), "x"), ConfigError);
  Manifest unlisted = m;
  unlisted.files.erase("b.safetensors");
  try {
    manifest_from_json(manifest_to_json(unlisted), "dir/manifest.json");
    FAIL() << "a piece in an unlisted file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("b.safetensors"), std::string::npos) << e.what();
  }
}

// Guards the manifest's integers (fuzz finding manifest-floatcast): a step, world_size, shape,
// rows or bytes outside its type (1e300, -9.2e19, 2^64, which nlohmann holds as doubles) was cast
// with undefined behaviour by get<int64_t>(), a fraction truncated. Each is a ConfigError naming
// the manifest, the field and the value.
TEST(Manifest, IntegersOutsideTheirRangeAreRefusedNamingTheField) {
  Manifest m;
  m.step = 12;
  m.world_size = 2;
  m.files["a.safetensors"] = {100, 42};
  m.model["w"] = {DType::f32, Shape{5, 3}, {{"a.safetensors", "model/w", 0, 5}}};
  const nlohmann::json valid = nlohmann::json::parse(manifest_to_json(m));
  ASSERT_EQ(manifest_from_json(valid.dump(), "dir/manifest.json"), m);
  struct Case {
    std::vector<std::string> path;  // the field, from the top
    nlohmann::json value;
    const char* says;
  };
  for (const Case& c : {
           Case{{"step"}, 1e300, "dir/manifest.json: step = 1e+300 is not an integer"},
           Case{{"step"}, -9.2e19, "step = -9.2e+19"},
           Case{{"step"}, 2.5, "step = 2.5"},
           Case{{"step"}, -1, "step = -1 is not an integer in [0, "},
           Case{{"world_size"}, 4294967297ULL, "world_size = 4294967297"},
           Case{{"world_size"}, 0, "world_size = 0"},
           Case{{"version"}, 1e300, "manifest version 1e+300"},
           Case{{"files", "a.safetensors", "bytes"},
                1.8446744073709552e19,
                "file 'a.safetensors' bytes = 1.8446744073709552e+19"},
           Case{{"model", "w", "shape", "1"}, 1e300, "model tensor 'w' shape = 1e+300"},
           Case{{"model", "w", "shape", "0"}, -5, "model tensor 'w' shape = -5"},
           Case{
               {"model", "w", "pieces", "0", "rows", "1"}, 1e300, "model tensor 'w' rows = 1e+300"},
       }) {
    nlohmann::json j = valid;
    nlohmann::json* field = &j;
    for (const std::string& step : c.path)
      field = field->is_array() ? &(*field)[std::stoul(step)] : &(*field)[step];
    *field = c.value;
    try {
      manifest_from_json(j.dump(), "dir/manifest.json");
      ADD_FAILURE() << c.says << ": accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

// Every file a manifest names is opened inside the checkpoint folder: a name that is a path
// (absolute, upward, or into a subfolder) would let a crafted manifest read any file.
TEST(Manifest, FileNamesMustStayInsideTheFolder) {
  for (const std::string name :
       {"../../../../etc/passwd", "/etc/passwd", "sub/rank_00000.safetensors", "..", "."}) {
    Manifest m;
    m.files[name] = {10, 1};
    m.model["w"] = {DType::f32, Shape{2}, {{name, "model/w", 0, 2}}};
    try {
      manifest_from_json(manifest_to_json(m), "dir/manifest.json");
      ADD_FAILURE() << "accepted file name '" << name << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not a plain name inside its folder"), std::string::npos)
          << e.what();
    }
  }
}

// trainer.json is checksummed in the manifest: a changed step or sampler position (a corrupt or
// hand-edited file) is refused naming the file, and so is a step that the manifest contradicts
// or a negative sampler position, even in a manifest written before the checksum existed.
TEST(Checkpoint, TrainerStateIsChecksummedAndChecked) {
  fs::path dir = fresh_dir("h2_checkpoint_trainer_state");
  const std::string written =
      save_checkpoint(dir.string(), {3, 9, "model: {}\n", 1}, {{"w", numbered(2, 2)}}, {}, 0);
  const fs::path state = fs::path(written) / kTrainerState;
  const std::string good = read_file(state.string());
  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    std::ofstream(state, std::ios::trunc) << text;
  };
  auto refused = [&](const std::string& says) {
    try {
      read_trainer_state(written);
      ADD_FAILURE() << "accepted: " << read_file(state.string());
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(state.string()), std::string::npos) << e.what();
    }
  };
  EXPECT_EQ(read_trainer_state(written).step, 3);
  rewrite("\"step\": 3", "\"step\": 1000000000000");
  refused("corrupted");
  rewrite("\"sampler_position\": 9", "\"sampler_position\": 8");  // same length, other bytes
  refused("corrupted");

  // Without the manifest's checksum (an older checkpoint) the values themselves are checked.
  const fs::path manifest_path = fs::path(written) / kManifest;
  Manifest manifest = manifest_from_json(read_file(manifest_path.string()), "m");
  ASSERT_TRUE(manifest.trainer_state.has_value());
  manifest.trainer_state.reset();
  std::ofstream(manifest_path, std::ios::trunc) << manifest_to_json(manifest);
  rewrite("\"step\": 3", "\"step\": 1000000000000");
  refused("its manifest says step 3");
  rewrite("\"sampler_position\": 9", "\"sampler_position\": -1");
  refused("sampler_position -1");
  rewrite("\"step\": 3", "\"step\": 3");
  EXPECT_EQ(read_trainer_state(written).sampler_position, 9u);
}

TEST(Checkpoint, WholeTensorsRoundTripAndOnlyCompleteFoldersCount) {
  fs::path dir = fresh_dir("h2_checkpoint_roundtrip");
  TensorMap model{{"w", numbered(6, 4)}, {"norm", numbered(1, 4, 0.5f)}};
  TensorMap optimizer{{"m/w", numbered(6, 4, 7)}};
  const std::string written =
      save_checkpoint(dir.string(), {3, 9, "model: {}\n", 1}, model, optimizer, 0);
  EXPECT_EQ(written, (dir / "step_000003").string());
  // A crash mid-write leaves a temporary folder, a folder without a manifest is incomplete.
  fs::create_directories(dir / ".tmp_step_000004");
  fs::create_directories(dir / "step_000005");
  EXPECT_EQ(latest_checkpoint(dir.string()), written);

  EXPECT_EQ(read_model_tensors(written).at("w").bytes, model.at("w").bytes);
  CheckpointReader reader(written);
  EXPECT_EQ(reader.read(Section::optimizer, "m/w").bytes, optimizer.at("m/w").bytes);
  EXPECT_EQ(reader.read(Section::model, "w", 2, 5).bytes, rows_of(model.at("w"), 2, 5).bytes);
  TrainerState state = read_trainer_state(written);
  EXPECT_EQ(state.step, 3);
  EXPECT_EQ(state.sampler_position, 9u);
  EXPECT_THROW(reader.read(Section::model, "missing"), ConfigError);
}

// Three writers' pieces (as save_checkpoint lays them out for three ranks) read back as whole
// tensors and as row ranges that cross the writers' boundaries.
TEST(Checkpoint, RowsSplitOverWritersAreReassembled) {
  fs::path dir = fresh_dir("h2_checkpoint_reshard") / "step_000001";
  fs::create_directories(dir);
  const StoredTensor w = numbered(7, 3);
  Manifest m;
  m.step = 1;
  m.world_size = 3;
  m.model["w"] = {DType::f32, w.shape, {}};
  for (int r = 0; r < 3; ++r) {
    auto [b, e] = even_rows(7, r, 3);
    const std::string file = fmt::format("rank_{:05}.safetensors", r);
    const uint64_t sum = write_safetensors((dir / file).string(), {{"model/w", rows_of(w, b, e)}});
    m.files[file] = {fs::file_size(dir / file), sum};
    m.model["w"].pieces.push_back({file, "model/w", b, e});
  }
  std::ofstream(dir / "manifest.json") << manifest_to_json(m);
  CheckpointReader reader(dir.string());
  EXPECT_EQ(reader.read(Section::model, "w").bytes, w.bytes);
  for (auto [b, e] : {std::pair{0, 7}, {1, 6}, {2, 3}, {4, 7}, {3, 3}})
    EXPECT_EQ(reader.read(Section::model, "w", b, e).bytes, rows_of(w, b, e).bytes)
        << "rows " << b << ".." << e;
}

TEST(Checkpoint, ACorruptedFileIsRefusedNamingIt) {
  fs::path dir = fresh_dir("h2_checkpoint_corrupt");
  const std::string written =
      save_checkpoint(dir.string(), {1, 0, "", 1}, {{"w", numbered(8, 8)}}, {}, 0);
  const fs::path file = fs::path(written) / "rank_00000.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(file) - 5));
    f.put('\x7f');  // one byte of tensor data
  }
  try {
    read_model_tensors(written);
    FAIL() << "a corrupted file was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupted"), std::string::npos) << e.what();
  }
}

// A child saves ever newer checkpoints of a 16 MiB tensor; the parent kills it with SIGKILL at
// varying moments. After each kill the newest complete checkpoint must load and hold exactly
// what was saved at its step.
TEST(Checkpoint, AWriterKilledAtAnyMomentLeavesTheLastCompleteCheckpoint) {
  fs::path dir = fresh_dir("h2_checkpoint_kill");
  test::expect_kills_leave_complete_checkpoints(dir, [&](int64_t first) {
    for (int64_t step = first;; ++step)
      save_checkpoint(dir.string(), {step, 0, "", 1}, {{"w", numbered(1024, 4096, float(step))}},
                      {}, 2);
  });
}

}  // namespace
}  // namespace h2::checkpoint
