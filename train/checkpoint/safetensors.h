// The safetensors file format (Hugging Face): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets}, then the raw little-endian
// bytes. H2 uses it for checkpoints so that other tools can read them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
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

// Writes `path` durably (durable_io.h: a crash leaves the old file or the whole new one) and
// returns the XXH3-64 checksum of its bytes.
uint64_t write_safetensors(const std::string& path, const TensorMap& tensors);
// ConfigError naming `what` (the file) and the problem for anything malformed.
TensorMap decode_safetensors(std::span<const std::byte> file, const std::string& what);
TensorMap read_safetensors(const std::string& path);

}  // namespace h2::checkpoint
