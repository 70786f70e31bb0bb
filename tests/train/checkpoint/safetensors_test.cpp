// safetensors files round-trip every supported dtype bit for bit, follow the format's layout
// (8-byte header length, JSON header, 8-byte-aligned data), and malformed files are rejected
// with errors that name the file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint/safetensors.h"

namespace h2::checkpoint {
namespace {

StoredTensor make(DType dtype, Shape shape, uint8_t seed) {
  StoredTensor t{dtype, shape,
                 std::vector<std::byte>(size_t(dtype_storage_bytes(dtype, shape.numel())))};
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = std::byte(uint8_t(seed + 7 * i));
  return t;
}

TEST(Safetensors, RoundTripsAndFollowsTheLayout) {
  std::string path = (std::filesystem::temp_directory_path() / "h2_st_test.safetensors").string();
  TensorMap tensors;
  tensors["model.embed_tokens.weight"] = make(DType::f32, {5, 3}, 1);
  tensors["model.norm.weight"] = make(DType::bf16, {3}, 2);
  tensors["ids"] = make(DType::i64, {4}, 3);
  tensors["empty"] = make(DType::f16, {0, 2}, 4);
  write_safetensors(path, tensors);
  TensorMap back = read_safetensors(path);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(back[name].dtype, t.dtype) << name;
    EXPECT_EQ(back[name].shape, t.shape) << name;
    EXPECT_EQ(back[name].bytes, t.bytes) << name;
  }
  std::ifstream in(path, std::ios::binary);
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  EXPECT_EQ(length % 8, 0u);
  std::string header(length, '\0');
  in.read(header.data(), std::streamsize(length));
  auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["model.norm.weight"]["dtype"], "BF16");
  EXPECT_EQ(j["model.embed_tokens.weight"]["shape"], (std::vector<int64_t>{5, 3}));
  std::filesystem::remove(path);
}

TEST(Safetensors, MalformedFilesNameTheFile) {
  std::string path = (std::filesystem::temp_directory_path() / "h2_st_bad.safetensors").string();
  {
    std::ofstream out(path, std::ios::binary);
    uint64_t length = 1000;
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << "{}";
  }
  try {
    read_safetensors(path);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_safetensors(path + ".missing"), ConfigError);
  std::filesystem::remove(path);
}

// Writes a safetensors file with `header` (JSON) and `data_bytes` bytes of data.
std::string write_raw(const std::string& name, const nlohmann::json& header, size_t data_bytes) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream out(path, std::ios::binary);
  const std::string text = header.dump();
  const uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << text << std::string(data_bytes, '\x01');
  return path;
}

nlohmann::json f32_entry(uint64_t begin, uint64_t end) {
  return {{"dtype", "F32"}, {"shape", {(end - begin) / 4}}, {"data_offsets", {begin, end}}};
}

// The format forbids overlapping tensors (two names aliasing one set of bytes: silently wrong
// weights) and bytes no tensor owns; the reference reader refuses both, and so must we.
TEST(Safetensors, TensorsMustTileTheDataWithoutOverlapsOrHoles) {
  const std::string tiled =
      write_raw("h2_st_tiled.safetensors", {{"a", f32_entry(0, 8)}, {"b", f32_entry(8, 16)}}, 16);
  EXPECT_EQ(read_safetensors(tiled).size(), 2u);
  struct Case {
    const char* name;
    nlohmann::json header;
    size_t data_bytes;
    const char* says;
  };
  for (const Case& c : {
           Case{"overlap", {{"a", f32_entry(0, 8)}, {"b", f32_entry(4, 12)}}, 12, "overlap"},
           Case{"alias", {{"a", f32_entry(0, 8)}, {"b", f32_entry(0, 8)}}, 8, "overlap"},
           Case{"hole", {{"a", f32_entry(0, 8)}, {"b", f32_entry(12, 20)}}, 20, "hole"},
           Case{"late start", {{"a", f32_entry(4, 12)}}, 12, "hole"},
           Case{
               "tail", {{"a", f32_entry(0, 8)}, {"b", f32_entry(8, 16)}}, 24, "cover 16 of the 24"},
       }) {
    const std::string path = write_raw("h2_st_case.safetensors", c.header, c.data_bytes);
    try {
      read_safetensors(path);
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
          << c.name << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// A header length past the reference implementation's 100 MB cap is refused before any
// allocation of that size, and a header that is JSON but not an object is named.
TEST(Safetensors, OversizedOrNonObjectHeadersAreRefused) {
  std::string huge(8, '\0');
  const uint64_t length = 200'000'000;
  std::memcpy(huge.data(), &length, 8);
  huge.resize(8 + 64, ' ');
  EXPECT_THROW(decode_safetensors(std::as_bytes(std::span(huge)), "huge"), ConfigError);
  const std::string array = write_raw("h2_st_array.safetensors", nlohmann::json::array({1, 2}), 0);
  EXPECT_THROW(read_safetensors(array), ConfigError);
}

// The ConfigError message of decoding a file with JSON header `header` and `data_bytes` zero
// bytes of data ("accepted" when it decodes).
std::string decode_error(const std::string& header, size_t data_bytes) {
  std::string file(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(file.data(), &length, 8);
  file += header;
  file.append(data_bytes, '\0');
  try {
    decode_safetensors(std::as_bytes(std::span(file)), "x.safetensors");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "accepted";
}

// Guards the header's integers: a shape or data_offsets element outside int64 (1e300, or 2^64,
// which nlohmann holds as a double) was cast with undefined behaviour (fuzz finding
// safetensors-floatcast), a negative extent raised a plain Error; each is a ConfigError naming the
// file, the tensor and the value.
TEST(Safetensors, HeaderIntegersOutsideTheirRangeAreRefusedNamingTheValue) {
  auto entry = [](const std::string& shape, const std::string& offsets) {
    return R"({"w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}";
  };
  EXPECT_EQ(decode_error(entry("[2, 1]", "[0, 8]"), 8), "accepted");
  for (const char* shape : {"[2, 1e300]", "[18446744073709551616]", "[-1]", "[1.5]", "[\"2\"]"}) {
    const std::string why = decode_error(entry(shape, "[0, 8]"), 8);
    EXPECT_NE(why.find("x.safetensors: tensor 'w' shape = "), std::string::npos) << why;
  }
  EXPECT_NE(decode_error(entry("2", "[0, 8]"), 8).find("shape is a JSON number"),
            std::string::npos);
  for (const char* offsets : {"[0, 1e300]", "[0, 18446744073709551616]", "[-8, 0]"}) {
    const std::string why = decode_error(entry("[2]", offsets), 8);
    EXPECT_NE(why.find("x.safetensors: tensor 'w' data_offsets = "), std::string::npos) << why;
  }
}

// Guards dtype_storage_bytes(dtype, numel), whose n * bits overflowed int64 for shape
// [2^61, 2] F32 (fuzz finding safetensors-storage-bytes-overflow; wrapped, such a tensor of 0
// bytes was accepted): a shape with more elements than the data holds is refused first.
TEST(Safetensors, ShapesLargerThanTheDataAreRefusedBeforeTheirSize) {
  const std::string huge =
      R"({"w": {"dtype": "F32", "shape": [2305843009213693952, 2], "data_offsets": [0, 0]}})";
  const std::string why = decode_error(huge, 0);
  EXPECT_NE(why.find("x.safetensors: tensor 'w' has shape [2305843009213693952, 2]: more F32 "
                     "elements than the 0 data bytes hold"),
            std::string::npos)
      << why;
  // Empty, but Shape::numel() would overflow before reaching the 0.
  EXPECT_NE(decode_error(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 0], )"
                         R"("data_offsets": [0, 0]}})",
                         0)
                .find("its extents multiply past 2^63"),
            std::string::npos);
  EXPECT_EQ(decode_error(R"({"w": {"dtype": "F32", "shape": [3, 0], "data_offsets": [0, 0]}})", 0),
            "accepted");
}

}  // namespace
}  // namespace h2::checkpoint
