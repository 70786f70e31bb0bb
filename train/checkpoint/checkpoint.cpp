// Checkpoint folders: the collective, atomic write and the verifying reader (see checkpoint.h).
#include "train/checkpoint/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_int.h"
#include "train/checkpoint/durable_io.h"
#include "train/checkpoint/step_folders.h"

namespace h2::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string rank_file(int rank) {
  return fmt::format("rank_{:05}.safetensors", rank);
}
std::string rank_sidecar(int rank) {
  return fmt::format("rank_{:05}.json", rank);
}
// DIR/.tmp_step_NNNNNN: where a save of `step` is written before its rename.
fs::path tmp_folder(const std::string& dir, int64_t step) {
  return fs::path(dir) / tmp_step_folder_name(step);
}

std::string piece_key(Section section, const std::string& name) {
  return fmt::format("{}/{}", section_name(section), name);
}

void barrier(comm::Communicator* group) {
  if (group != nullptr) group->barrier();
}

// Removes a checkpoint folder so that no moment of it looks complete: its manifest first (made
// durable), then the rest. A kill in the middle leaves a folder no reader takes for a checkpoint,
// which the next run's CheckpointDir removes.
void retire(const fs::path& folder) {
  if (!fs::exists(folder)) return;
  fs::remove(folder / kManifest);
  sync_directory(folder.string());
  fs::remove_all(folder);
}

FileEntry write_text_durably(const fs::path& path, const std::string& text) {
  return {text.size(), write_file_durably(path.string(),
                                          [&](ByteSink& sink) { sink(text.data(), text.size()); })};
}

// What one rank wrote: its file's size and checksum and the pieces in it, for rank 0 to merge.
nlohmann::json sidecar(const std::string& file, uint64_t bytes, uint64_t sum,
                       const RankContents& mine) {
  nlohmann::json pieces = nlohmann::json::array();
  for (Section s : {Section::model, Section::optimizer})
    for (const OwnedRows& o : s == Section::model ? mine.model : mine.optimizer)
      pieces.push_back(
          {{"section", section_name(s)},
           {"name", o.name},
           {"dtype", dtype_name(o.dtype)},
           {"shape", std::vector<int64_t>(o.global_shape.begin(), o.global_shape.end())},
           {"rows", {o.row_begin, o.row_end}}});
  return {{"file", file}, {"bytes", bytes}, {"xxh3_64", checksum_hex(sum)}, {"pieces", pieces}};
}

// Rank 0: the manifest from every rank's sidecar (pieces sorted by row, empty ones dropped).
Manifest merge_sidecars(const fs::path& tmp, int ranks, int64_t step) {
  Manifest m;
  m.step = step;
  m.world_size = ranks;
  for (int r = 0; r < ranks; ++r) {
    const fs::path path = tmp / rank_sidecar(r);
    const nlohmann::json j = nlohmann::json::parse(read_file(path.string()));
    const std::string file = j.at("file");
    m.files[file] = {j.at("bytes").get<uint64_t>(),
                     std::stoull(j.at("xxh3_64").get<std::string>(), nullptr, 16)};
    for (const auto& p : j.at("pieces")) {
      const Section s = p.at("section") == "model" ? Section::model : Section::optimizer;
      const std::string name = p.at("name");
      TensorEntry& t = m.tensors(s)[name];
      t.dtype = parse_dtype(p.at("dtype").get<std::string>());
      const auto dims = p.at("shape").get<std::vector<int64_t>>();
      t.shape = Shape(std::span<const int64_t>(dims));
      auto rows = p.at("rows").get<std::vector<int64_t>>();
      if (rows[1] > rows[0]) t.pieces.push_back({file, piece_key(s, name), rows[0], rows[1]});
    }
  }
  for (Section s : {Section::model, Section::optimizer})
    for (auto& [name, t] : m.tensors(s))
      std::sort(t.pieces.begin(), t.pieces.end(),
                [](const Piece& a, const Piece& b) { return a.row_begin < b.row_begin; });
  return m;
}

std::string trainer_json(const TrainerState& state) {
  nlohmann::json j{{"step", state.step},
                   {"sampler_position", state.sampler_position},
                   {"world_size", state.world_size},
                   {"config_yaml", state.config_yaml}};
  if (!state.job.empty()) j["job"] = state.job;
  if (state.train_tokens >= 0) j["train_tokens"] = state.train_tokens;
  return j.dump(2) + "\n";
}

}  // namespace

StoredTensor store(const Tensor& tensor) {
  Tensor dense = tensor.contiguous();
  StoredTensor s{dense.dtype(), dense.shape(), std::vector<std::byte>(size_t(dense.nbytes()))};
  dense.device().copy_bytes(s.bytes.data(), false, dense.data(), true, s.bytes.size(),
                            dense.device().default_stream());
  return s;
}

TensorSource rows_source(const Tensor& tensor, int64_t begin, int64_t end) {
  const Tensor rows = tensor.rank() == 0 ? tensor : tensor.slice(0, begin, end);
  TensorSource source{"", rows.dtype(), rows.shape(), nullptr};
  source.write = [rows](ByteSink& sink) {
    Device& device = rows.device();
    device.default_stream().synchronize();  // pending updates of the state have landed
    if (rows.is_contiguous() && device.memory_kind() == MemoryKind::host) {
      sink(rows.data(), size_t(rows.nbytes()));
      return;
    }
    if (rows.rank() == 0) {
      const StoredTensor whole = store(rows);
      sink(whole.bytes.data(), whole.bytes.size());
      return;
    }
    // Blocks of whole rows of at most kStagingBytes (one row when a row is larger).
    const int64_t n = rows.size(0);
    const int64_t row_bytes = std::max<int64_t>(1, rows.nbytes() / n);
    const int64_t block = std::max<int64_t>(1, kStagingBytes / row_bytes);
    for (int64_t r = 0; r < n; r += block) {
      const StoredTensor part = store(rows.slice(0, r, std::min(n, r + block)));
      sink(part.bytes.data(), part.bytes.size());
    }
  };
  return source;
}

void load_into(Tensor& tensor, const StoredTensor& stored, const std::string& what) {
  if (!(stored.shape == tensor.shape()))
    H2_THROW(ConfigError, "{}: tensor is {} but the model expects {}", what, stored.shape.str(),
             tensor.shape().str());
  Device& device = tensor.device();
  Tensor staged = Tensor::empty(stored.shape, stored.dtype, device);
  device.copy_bytes(staged.data(), true, stored.bytes.data(), false, stored.bytes.size(),
                    device.default_stream());
  tensor.copy_from(staged);
}

std::string begin_save(comm::Communicator* group, const std::string& dir, int64_t step) {
  const fs::path tmp = tmp_folder(dir, step);
  if (group == nullptr || group->rank() == 0) {
    fs::create_directories(dir);
    fs::remove_all(tmp);  // left by a crash mid-write
    fs::create_directories(tmp);
  }
  barrier(group);
  return tmp.string();
}

void write_rank_share(const std::string& tmp_dir, int rank, const RankContents& mine) {
  const fs::path tmp(tmp_dir);
  // Streamed from the state itself: no second copy of this rank's share in memory.
  std::vector<TensorSource> tensors;
  for (Section s : {Section::model, Section::optimizer})
    for (const OwnedRows& o : s == Section::model ? mine.model : mine.optimizer)
      if (o.row_end > o.row_begin) {
        tensors.push_back(o.local);
        tensors.back().name = piece_key(s, o.name);
      }
  const std::string file = rank_file(rank);
  const uint64_t sum = write_safetensors((tmp / file).string(), std::move(tensors));
  write_text_durably(tmp / rank_sidecar(rank),
                     sidecar(file, fs::file_size(tmp / file), sum, mine).dump());
}

std::string finish_save(comm::Communicator* group, const std::string& dir,
                        const TrainerState& state, int64_t keep_last) {
  const int rank = group != nullptr ? group->rank() : 0;
  const int ranks = group != nullptr ? group->size() : 1;
  const fs::path final_dir = fs::path(dir) / step_folder_name(state.step);
  const fs::path tmp = tmp_folder(dir, state.step);
  barrier(group);  // every rank's file and sidecar are on the disk

  if (rank == 0) {
    Manifest manifest = merge_sidecars(tmp, ranks, state.step);
    for (int r = 0; r < ranks; ++r) fs::remove(tmp / rank_sidecar(r));
    manifest.trainer_state = write_text_durably(tmp / kTrainerState, trainer_json(state));
    write_text_durably(tmp / kManifest, manifest_to_json(manifest));  // the folder is complete
    retire(final_dir);  // a checkpoint of the same step from an interrupted run
    fs::rename(tmp, final_dir);
    sync_directory(dir);
    if (keep_last > 0) {
      // The new checkpoint and the keep_last - 1 before it stay. Newer steps, another run's left
      // in the folder (the trainer warns of them at its start), are not this run's to prune.
      std::vector<fs::path> older;
      for (const StepFolder& c : complete_checkpoints(dir))
        if (c.step < state.step) older.push_back(c.path);
      const size_t keep_older = size_t(keep_last - 1);
      for (size_t i = 0; i + keep_older < older.size(); ++i) retire(older[i]);
    }
  }
  barrier(group);
  return final_dir.string();
}

std::string save_checkpoint(comm::Communicator* group, const std::string& dir,
                            const TrainerState& state, const RankContents& mine,
                            int64_t keep_last) {
  const std::string tmp = begin_save(group, dir, state.step);
  write_rank_share(tmp, group != nullptr ? group->rank() : 0, mine);
  return finish_save(group, dir, state, keep_last);
}

std::string save_checkpoint(const std::string& dir, const TrainerState& state,
                            const TensorMap& model, const TensorMap& optimizer, int64_t keep_last) {
  RankContents mine;
  for (Section s : {Section::model, Section::optimizer})
    for (const auto& [name, t] : s == Section::model ? model : optimizer)
      (s == Section::model ? mine.model : mine.optimizer)
          .push_back({name, t.dtype, t.shape, 0, shard_rows(t.shape), stored_source(name, t)});
  return save_checkpoint(nullptr, dir, state, mine, keep_last);
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const std::vector<StepFolder> all = complete_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().path.string();
}

std::optional<std::string> latest_checkpoint_of_job(const std::string& dir,
                                                    const std::string& job) {
  const std::vector<StepFolder> all = complete_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      if (read_trainer_state(it->path.string()).job == job) return it->path.string();
    } catch (const ConfigError&) {
      // Another run's folder that cannot be read is not this job's: look further back.
    }
  }
  return std::nullopt;
}

TrainerState read_trainer_state(const std::string& checkpoint_dir) {
  const std::string path = (fs::path(checkpoint_dir) / kTrainerState).string();
  if (!fs::exists(path))
    H2_THROW(ConfigError, "cannot open '{}': not an h2 checkpoint folder", path);
  const std::string text = read_file(path);
  // A checkpoint's manifest carries trainer.json's size and checksum (folders written before it
  // did, and folders made by h2 import, have no manifest entry for it).
  std::optional<Manifest> manifest;
  if (const fs::path manifest_path = fs::path(checkpoint_dir) / kManifest;
      fs::exists(manifest_path))
    manifest = manifest_from_json(read_file(manifest_path.string()), manifest_path.string());
  if (manifest && manifest->trainer_state) {
    const uint64_t got = checksum(std::as_bytes(std::span(text)));
    if (text.size() != manifest->trainer_state->bytes || got != manifest->trainer_state->checksum)
      H2_THROW(ConfigError,
               "{}: corrupted ({} bytes, checksum {}; the manifest says {} bytes, checksum {}). "
               "Remove the folder {} to resume from the checkpoint before it",
               path, text.size(), checksum_hex(got), manifest->trainer_state->bytes,
               checksum_hex(manifest->trainer_state->checksum), checkpoint_dir);
  }
  TrainerState state;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    const nlohmann::json& position = j.at("sampler_position");
    if (!position.is_number_unsigned())
      H2_THROW(ConfigError, "{}: sampler_position {} is not a count of micro-batches", path,
               position.dump());
    state = {json_int(j.at("step"), path + ": step", 0),
             position.get<uint64_t>(),
             j.at("config_yaml").get<std::string>(),
             j.value("world_size", 1),
             j.contains("job") ? j.at("job").get<std::string>() : std::string(),
             j.contains("train_tokens") ? json_int(j.at("train_tokens"), path + ": train_tokens", 0)
                                        : int64_t(-1)};
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed trainer state: {}", path, e.what());
  }
  if (state.step < 0 || state.world_size < 1 || (manifest && state.step != manifest->step))
    H2_THROW(ConfigError, "{}: step {} (world size {}) does not match the checkpoint{}", path,
             state.step, state.world_size,
             manifest ? fmt::format(" (its manifest says step {})", manifest->step) : "");
  return state;
}

CheckpointReader::CheckpointReader(std::string checkpoint_dir) : dir_(std::move(checkpoint_dir)) {
  const std::string path = (fs::path(dir_) / kManifest).string();
  if (!fs::exists(path))
    H2_THROW(ConfigError, "'{}' has no {}: not a complete h2 checkpoint folder", dir_, kManifest);
  manifest_ = manifest_from_json(read_file(path), path);
}

bool CheckpointReader::has(Section section, const std::string& name) const {
  return manifest_.tensors(section).contains(name);
}

const TensorMap& CheckpointReader::file(const std::string& name) {
  if (auto it = files_.find(name); it != files_.end()) return it->second;
  const std::string path = (fs::path(dir_) / name).string();
  const std::string bytes = read_file(path);
  const FileEntry& want = manifest_.files.at(name);
  const uint64_t got = checksum(std::as_bytes(std::span(bytes)));
  if (bytes.size() != want.bytes || got != want.checksum)
    H2_THROW(ConfigError,
             "{}: corrupted ({} bytes, checksum {}; the manifest says {} bytes, checksum {}). "
             "Remove the folder {} to resume from the checkpoint before it",
             path, bytes.size(), checksum_hex(got), want.bytes, checksum_hex(want.checksum), dir_);
  return files_.emplace(name, decode_safetensors(std::as_bytes(std::span(bytes)), path))
      .first->second;
}

StoredTensor CheckpointReader::read(Section section, const std::string& name, int64_t begin,
                                    int64_t end) {
  const auto& tensors = manifest_.tensors(section);
  auto it = tensors.find(name);
  if (it == tensors.end())
    H2_THROW(ConfigError, "{}: no {} tensor '{}' (a checkpoint of another model?)", dir_,
             section_name(section), name);
  const TensorEntry& entry = it->second;
  const int64_t rows = shard_rows(entry.shape);
  if (end < 0) end = rows;
  H2_CHECK(0 <= begin && begin <= end && end <= rows, "rows [{}, {}) of '{}' ({} rows)", begin, end,
           name, rows);
  StoredTensor out;
  out.dtype = entry.dtype;
  out.shape = entry.shape;
  if (entry.shape.rank() > 0) out.shape[0] = end - begin;
  const size_t row_bytes = size_t(dtype_storage_bytes(entry.dtype, entry.shape.numel())) /
                           size_t(std::max<int64_t>(rows, 1));
  out.bytes.resize(size_t(end - begin) * row_bytes);
  for (const Piece& piece : entry.pieces) {
    const int64_t lo = std::max(begin, piece.row_begin), hi = std::min(end, piece.row_end);
    if (lo >= hi) continue;
    const TensorMap& stored = file(piece.file);
    auto found = stored.find(piece.key);
    const std::string where = fmt::format("{}/{}", dir_, piece.file);
    if (found == stored.end())
      H2_THROW(ConfigError, "{}: no tensor '{}' although the manifest lists it", where, piece.key);
    const StoredTensor& part = found->second;
    Shape want = entry.shape;
    if (want.rank() > 0) want[0] = piece.row_end - piece.row_begin;
    if (part.dtype != entry.dtype || !(part.shape == want))
      H2_THROW(ConfigError, "{}: '{}' is {} {}; the manifest says {} {}", where, piece.key,
               dtype_name(part.dtype), part.shape.str(), dtype_name(entry.dtype), want.str());
    std::copy_n(part.bytes.begin() + (lo - piece.row_begin) * int64_t(row_bytes),
                (hi - lo) * int64_t(row_bytes),
                out.bytes.begin() + (lo - begin) * int64_t(row_bytes));
  }
  return out;
}

TensorMap read_model_tensors(const std::string& checkpoint_dir) {
  CheckpointReader reader(checkpoint_dir);
  TensorMap tensors;
  for (const auto& [name, entry] : reader.manifest().model)
    tensors[name] = reader.read(Section::model, name);
  return tensors;
}

}  // namespace h2::checkpoint
