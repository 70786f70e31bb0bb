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

}  // namespace
}  // namespace h2::checkpoint
