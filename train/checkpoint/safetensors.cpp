// safetensors reading and writing (see safetensors.h).
#include "train/checkpoint/safetensors.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace h2::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
    case DType::f8e4m3:
      return "F8_E4M3";
    case DType::f8e5m2:
      return "F8_E5M2";
    default:
      H2_THROW(UnsupportedError, "safetensors has no dtype for {}", dtype_name(dtype));
  }
}

DType h2_dtype(const std::string& name, const std::string& path) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8,
                  DType::f8e4m3, DType::f8e5m2})
    if (name == safetensors_dtype(t)) return t;
  H2_THROW(ConfigError, "{}: unsupported safetensors dtype '{}'", path, name);
}

}  // namespace

void write_safetensors(const std::string& path, const TensorMap& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    H2_CHECK(int64_t(t.bytes.size()) == dtype_storage_bytes(t.dtype, t.shape.numel()),
             "safetensors: '{}' holds {} bytes for {} {}", name, t.bytes.size(),
             dtype_name(t.dtype), t.shape.str());
    header[name] = {{"dtype", safetensors_dtype(t.dtype)},
                    {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  uint64_t length = text.size();
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) H2_THROW(Error, "cannot write '{}'", tmp);
    out.write(reinterpret_cast<const char*>(&length), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& [name, t] : tensors)
      out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
    out.flush();
    if (!out) H2_THROW(Error, "writing '{}' failed (disk full?)", tmp);
  }
  std::filesystem::rename(tmp, path);
}

TensorMap read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) H2_THROW(ConfigError, "cannot open checkpoint file '{}'", path);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  auto file_size = std::filesystem::file_size(path);
  if (!in || length > file_size - 8)
    H2_THROW(ConfigError, "{}: not a safetensors file (header length {})", path, length);
  std::string text(length, '\0');
  in.read(text.data(), std::streamsize(length));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: safetensors header is not JSON: {}", path, e.what());
  }
  const uint64_t data_start = 8 + length, data_size = file_size - data_start;
  TensorMap tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StoredTensor t;
    t.dtype = h2_dtype(entry.at("dtype").get<std::string>(), path);
    for (int64_t d : entry.at("shape").get<std::vector<int64_t>>()) t.shape.push_back(d);
    auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    uint64_t want = uint64_t(dtype_storage_bytes(t.dtype, t.shape.numel()));
    if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data_size ||
        offsets[1] - offsets[0] != want)
      H2_THROW(ConfigError, "{}: tensor '{}' has bad data_offsets for {} {}", path, name,
               dtype_name(t.dtype), t.shape.str());
    t.bytes.resize(want);
    in.seekg(std::streamoff(data_start + offsets[0]));
    in.read(reinterpret_cast<char*>(t.bytes.data()), std::streamsize(want));
    if (!in) H2_THROW(ConfigError, "{}: truncated data for '{}'", path, name);
    tensors.emplace(name, std::move(t));
  }
  return tensors;
}

}  // namespace h2::checkpoint
