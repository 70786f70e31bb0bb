// The safetensors file format (Hugging Face): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets}, then the raw little-endian
// bytes. H2 uses it for checkpoints so that other tools can read them directly.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace h2::checkpoint {

struct StoredTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> bytes;
};

using TensorMap = std::map<std::string, StoredTensor>;

// Writes to `path` + ".tmp" then renames, so a crash never leaves a half-written file.
void write_safetensors(const std::string& path, const TensorMap& tensors);
// ConfigError naming the file and the problem for anything malformed.
TensorMap read_safetensors(const std::string& path);

}  // namespace h2::checkpoint
