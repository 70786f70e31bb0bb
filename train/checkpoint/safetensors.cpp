// safetensors reading and writing (see safetensors.h).
#include "train/checkpoint/safetensors.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_int.h"
#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

// The reference implementation's limit on the JSON header (safetensors' MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

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

// The product of the nonzero extents of `dims` (each >= 0), formed without overflow: -1 past
// 2^63 - 1, where Shape::numel() would fail even with a zero extent after them.
int64_t nonzero_product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d == 0) continue;
    if (n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

uint64_t write_safetensors(const std::string& path, std::vector<TensorSource> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorSource& a, const TensorSource& b) { return a.name < b.name; });
  nlohmann::json header = nlohmann::json::object();
  std::vector<size_t> sizes;
  size_t offset = 0;
  for (const TensorSource& t : tensors) {
    H2_CHECK(!header.contains(t.name), "safetensors: '{}' appears twice in {}", t.name, path);
    const size_t bytes = size_t(dtype_storage_bytes(t.dtype, t.shape.numel()));
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                      {"data_offsets", {offset, offset + bytes}}};
    sizes.push_back(bytes);
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const uint64_t length = text.size();
  return write_file_durably(path, [&](ByteSink& sink) {
    sink(&length, 8);
    sink(text.data(), text.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      size_t written = 0;
      ByteSink counted = [&](const void* data, size_t bytes) {
        written += bytes;
        H2_CHECK(written <= sizes[i], "safetensors: '{}' gave more than its {} bytes ({})",
                 tensors[i].name, sizes[i], path);
        sink(data, bytes);
      };
      tensors[i].write(counted);
      H2_CHECK(written == sizes[i], "safetensors: '{}' gave {} bytes, not its {} ({})",
               tensors[i].name, written, sizes[i], path);
    }
  });
}

TensorSource stored_source(const std::string& name, const StoredTensor& stored) {
  return {name, stored.dtype, stored.shape,
          [&stored](ByteSink& sink) { sink(stored.bytes.data(), stored.bytes.size()); }};
}

uint64_t write_safetensors(const std::string& path, const TensorMap& tensors) {
  std::vector<TensorSource> sources;
  for (const auto& [name, t] : tensors) {
    H2_CHECK(int64_t(t.bytes.size()) == dtype_storage_bytes(t.dtype, t.shape.numel()),
             "safetensors: '{}' holds {} bytes for {} {}", name, t.bytes.size(),
             dtype_name(t.dtype), t.shape.str());
    sources.push_back(stored_source(name, t));
  }
  return write_safetensors(path, std::move(sources));
}

TensorMap decode_safetensors(std::span<const std::byte> file, const std::string& what) {
  uint64_t length = 0;
  if (file.size() >= 8) std::memcpy(&length, file.data(), 8);
  if (file.size() < 8 || length > file.size() - 8 || length > kMaxHeaderBytes)
    H2_THROW(ConfigError,
             "{}: not a safetensors file (header length {}, file {} bytes; headers are at most "
             "{} bytes)",
             what, length, file.size(), kMaxHeaderBytes);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(file.data()) + 8,
                                   reinterpret_cast<const char*>(file.data()) + 8 + length);
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: safetensors header is not JSON: {}", what, e.what());
  }
  if (!header.is_object())
    H2_THROW(ConfigError, "{}: safetensors header is not a JSON object", what);
  const std::span<const std::byte> data = file.subspan(8 + length);
  TensorMap tensors;
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // [begin, end) of each tensor's bytes
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StoredTensor t;
    try {
      t.dtype = h2_dtype(entry.at("dtype").get<std::string>(), what);
      const std::string field = fmt::format("{}: tensor '{}'", what, name);
      const std::vector<int64_t> dims = json_ints(entry.at("shape"), field + " shape", 0);
      if (dims.size() > size_t(Shape::kMaxDims))
        H2_THROW(ConfigError, "{} has {} dimensions; H2 holds at most {}", field, dims.size(),
                 Shape::kMaxDims);
      // A shape the data cannot hold is refused before its byte count, which could overflow.
      const int64_t product = nonzero_product(dims);
      const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
      const int64_t most = int64_t(data.size() * 8 / uint64_t(dtype_bits(t.dtype)));
      if (product < 0)
        H2_THROW(ConfigError, "{} has shape [{}]: its extents multiply past 2^63", field,
                 fmt::join(dims, ", "));
      if (!empty && product > most)
        H2_THROW(ConfigError, "{} has shape [{}]: more {} elements than the {} data bytes hold",
                 field, fmt::join(dims, ", "), safetensors_dtype(t.dtype), data.size());
      for (int64_t d : dims) t.shape.push_back(d);
      const std::vector<int64_t> offsets =
          json_ints(entry.at("data_offsets"), field + " data_offsets", 0);
      const uint64_t want = uint64_t(dtype_storage_bytes(t.dtype, t.shape.numel()));
      if (offsets.size() != 2 || offsets[1] < offsets[0] || uint64_t(offsets[1]) > data.size() ||
          uint64_t(offsets[1] - offsets[0]) != want)
        H2_THROW(ConfigError, "{}: tensor '{}' has bad data_offsets for {} {}", what, name,
                 dtype_name(t.dtype), t.shape.str());
      const auto bytes = data.subspan(size_t(offsets[0]), want);
      t.bytes.assign(bytes.begin(), bytes.end());
      extents.emplace_back(offsets[0], offsets[1]);
    } catch (const nlohmann::json::exception& e) {
      H2_THROW(ConfigError, "{}: tensor '{}' has a malformed entry: {}", what, name, e.what());
    }
    tensors.emplace(name, std::move(t));
  }
  // The format's rule: the tensors tile the data exactly, without overlaps or holes (an overlap
  // would alias two tensors' weights; a hole is bytes no tensor owns).
  std::sort(extents.begin(), extents.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : extents) {
    if (begin != covered)
      H2_THROW(ConfigError,
               "{}: tensor data_offsets {} at byte {} of the data (tensors must tile the data "
               "without overlaps or holes)",
               what, begin < covered ? "overlap" : "leave a hole", std::min(begin, covered));
    covered = end;
  }
  if (covered != data.size())
    H2_THROW(ConfigError, "{}: the tensors cover {} of the {} data bytes (a hole at the end)", what,
             covered, data.size());
  return tensors;
}

TensorMap read_safetensors(const std::string& path) {
  const std::string file = read_file(path);
  return decode_safetensors(std::as_bytes(std::span(file)), path);
}

}  // namespace h2::checkpoint
