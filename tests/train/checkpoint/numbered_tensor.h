// Test tensors whose every element says where it is (checkpoint tests): a (rows, cols) f32 tensor
// whose element (r, c) is r * 1000 + c + offset, so a misplaced row or a stale copy shows.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>

#include "train/checkpoint/safetensors.h"

namespace h2::checkpoint::test {

inline StoredTensor numbered(int64_t rows, int64_t cols, float offset = 0) {
  StoredTensor t{DType::f32, Shape{rows, cols}, {}};
  t.bytes.resize(size_t(rows * cols) * 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = float(r * 1000 + c) + offset;
      std::memcpy(t.bytes.data() + (r * cols + c) * 4, &v, 4);
    }
  return t;
}

// An empty folder of that name under the temporary directory (removed first).
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace h2::checkpoint::test
