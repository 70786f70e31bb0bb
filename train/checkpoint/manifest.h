// The manifest of a checkpoint folder (manifest.json): every global tensor of the model and the
// optimizer with its dtype and shape, the pieces it is split into (rows of dim 0, each in one
// rank's file), and each file's size and XXH3-64 checksum, trainer.json's included. It is written
// last, by rank 0, so a folder with a manifest is complete; readers assemble any rows of any
// tensor from it, whatever the number of ranks that wrote it (resharding). Every file it names is
// a plain name inside the folder.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace h2::checkpoint {

inline constexpr const char* kManifest = "manifest.json";
inline constexpr const char* kTrainerState = "trainer.json";

enum class Section { model, optimizer };
std::string_view section_name(Section section);  // "model", "optimizer"

// Rows [row_begin, row_end) of a tensor, stored under `key` in `file`.
struct Piece {
  std::string file;
  std::string key;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  bool operator==(const Piece&) const = default;
};

struct TensorEntry {
  DType dtype = DType::f32;
  Shape shape;                // global
  std::vector<Piece> pieces;  // ascending, covering every row once
  bool operator==(const TensorEntry&) const = default;
};

struct FileEntry {
  uint64_t bytes = 0;
  uint64_t checksum = 0;  // XXH3-64 of the whole file
  bool operator==(const FileEntry&) const = default;
};

struct Manifest {
  int64_t step = 0;
  int world_size = 1;  // ranks that wrote the checkpoint
  std::map<std::string, TensorEntry> model, optimizer;
  std::map<std::string, FileEntry> files;  // the tensor files, by name
  std::optional<FileEntry> trainer_state;  // trainer.json (absent in manifests before it was)
  std::map<std::string, TensorEntry>& tensors(Section s) {
    return s == Section::model ? model : optimizer;
  }
  const std::map<std::string, TensorEntry>& tensors(Section s) const {
    return s == Section::model ? model : optimizer;
  }
  bool operator==(const Manifest&) const = default;
};

// Rows a tensor's dim 0 has for sharding (1 for a 0-d tensor).
int64_t shard_rows(const Shape& shape);
// The rows rank `rank` of `ranks` owns when `rows` are split as evenly as possible, lower ranks
// first: [rows * rank / ranks, rows * (rank + 1) / ranks).
std::pair<int64_t, int64_t> even_rows(int64_t rows, int rank, int ranks);

std::string manifest_to_json(const Manifest& manifest);
// Parses and checks (pieces in order, covering each tensor's rows exactly once, files listed);
// ConfigError naming `path` and the problem.
Manifest manifest_from_json(const std::string& text, const std::string& path);

}  // namespace h2::checkpoint
