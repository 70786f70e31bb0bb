// The safetensors file format (Hugging Face): an 8-byte little-endian header length, a JSON
// header mapping each tensor name to {dtype, shape, data_offsets}, then the raw little-endian
// bytes. H2 uses it for checkpoints so that other tools can read them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {

struct StoredTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> bytes;
};

using TensorMap = std::map<std::string, StoredTensor>;

// One tensor of a file being written: `write` hands its bytes to the sink (exactly
// dtype_storage_bytes(dtype, shape.numel()) of them, checked) while the file is written, so a
// writer streams tensors from wherever they live instead of first copying every one.
struct TensorSource {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::function<void(ByteSink&)> write;
};

// A source over bytes already in memory (`stored` must outlive the write).
TensorSource stored_source(const std::string& name, const StoredTensor& stored);

// Writes `path` durably (durable_io.h: a crash leaves the old file or the whole new one), tensors
// in name order, hashing while writing; returns the XXH3-64 checksum of its bytes.
uint64_t write_safetensors(const std::string& path, std::vector<TensorSource> tensors);
uint64_t write_safetensors(const std::string& path, const TensorMap& tensors);
// ConfigError naming `what` (the file) and the problem for anything malformed.
TensorMap decode_safetensors(std::span<const std::byte> file, const std::string& what);
TensorMap read_safetensors(const std::string& path);

}  // namespace h2::checkpoint
