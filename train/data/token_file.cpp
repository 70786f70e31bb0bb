// Token files: llm.c .bin (header validated, uint16 or uint32), nanoGPT's headerless uint16, and
// the llm.c writer.
// Both assume a little-endian host (checked at compile time), which is what the format stores.
#include "train/data/token_file.h"

#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace h2::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .bin token format is little-endian; add byte swapping for this host");

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The open file's size in bytes; ConfigError when it is not a regular file.
int64_t file_size(std::FILE* file, const std::string& path) {
  if (std::fseek(file, 0, SEEK_END) != 0)
    H2_THROW(ConfigError, "{}: cannot seek (not a regular file?)", path);
  const long size = std::ftell(file);
  if (size < 0) H2_THROW(ConfigError, "{}: cannot determine the file size", path);
  std::rewind(file);
  return size;
}

File open_tokens(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) H2_THROW(ConfigError, "{}: cannot open token file: {}", path, std::strerror(errno));
  return file;
}

// Reads `count` little-endian tokens of type T from the file's position, widened to int32.
template <class T>
std::vector<int32_t> read_body(std::FILE* file, int64_t count, const std::string& path) {
  std::vector<T> raw(static_cast<size_t>(count));
  if (std::fread(raw.data(), sizeof(T), raw.size(), file) != raw.size())
    H2_THROW(ConfigError, "{}: read fewer than the {} tokens", path, count);
  std::vector<int32_t> tokens(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if constexpr (sizeof(T) == 4)
      if (raw[i] > uint32_t(INT32_MAX))
        H2_THROW(ConfigError, "{}: token {} at position {} is above {}", path, raw[i], i,
                 INT32_MAX);
    tokens[i] = int32_t(raw[i]);
  }
  return tokens;
}

bool is_known_header(int32_t magic, int32_t version) {
  return (magic == kTokenFileMagic && version == kTokenFileVersion) ||
         (magic == kTokenFileMagicU32 && version == kTokenFileVersionU32);
}

}  // namespace

bool has_token_file_header(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  int32_t head[2] = {0, 0};
  return file && std::fread(head, 4, 2, file.get()) == 2 && is_known_header(head[0], head[1]);
}

std::vector<int32_t> read_token_file(const std::string& path) {
  File file = open_tokens(path);
  // Size from the open handle, so the check and the read see the same file.
  const int64_t size = file_size(file.get(), path);
  if (size < kTokenFileHeaderBytes)
    H2_THROW(ConfigError,
             "{}: {} bytes is shorter than the {}-byte header of an llm.c .bin token file "
             "(nanoGPT's headerless uint16 files are data.format: uint16)",
             path, size, kTokenFileHeaderBytes);

  std::array<int32_t, kTokenFileHeaderInts> header{};
  if (std::fread(header.data(), 4, header.size(), file.get()) != header.size())
    H2_THROW(ConfigError, "{}: cannot read the header", path);
  if (header[0] != kTokenFileMagic && header[0] != kTokenFileMagicU32)
    H2_THROW(ConfigError,
             "{}: magic {} is not {} or {} (not an llm.c .bin token file; nanoGPT's headerless "
             "uint16 files are data.format: uint16)",
             path, header[0], kTokenFileMagic, kTokenFileMagicU32);
  if (!is_known_header(header[0], header[1]))
    H2_THROW(ConfigError,
             "{}: version {} is not supported with magic {} (version {}: uint16 tokens with magic "
             "{}; version {}: uint32 tokens with magic {})",
             path, header[1], header[0], kTokenFileVersion, kTokenFileMagic, kTokenFileVersionU32,
             kTokenFileMagicU32);
  const int64_t token_bytes = header[0] == kTokenFileMagic ? 2 : 4;
  const int64_t declared = header[2];
  if (declared < 0) H2_THROW(ConfigError, "{}: header declares {} tokens", path, declared);
  const int64_t body_bytes = size - kTokenFileHeaderBytes;
  if (body_bytes != declared * token_bytes) {
    if (body_bytes % token_bytes != 0)
      H2_THROW(ConfigError,
               "{}: header declares {} tokens but the file holds {} bytes after the header (not a "
               "whole number of {}-byte tokens: truncated?)",
               path, declared, body_bytes, token_bytes);
    H2_THROW(ConfigError, "{}: header declares {} tokens but the file holds {}", path, declared,
             body_bytes / token_bytes);
  }
  return token_bytes == 2 ? read_body<uint16_t>(file.get(), declared, path)
                          : read_body<uint32_t>(file.get(), declared, path);
}

std::vector<int32_t> read_uint16_file(const std::string& path) {
  if (has_token_file_header(path))
    H2_THROW(ConfigError,
             "{}: starts with an llm.c token file header, which data.format uint16 would read as "
             "tokens: set data.format: bin",
             path);
  File file = open_tokens(path);
  const int64_t size = file_size(file.get(), path);
  if (size % 2 != 0)
    H2_THROW(ConfigError,
             "{}: {} bytes is not a whole number of uint16 tokens (truncated, or not a nanoGPT "
             "token file?)",
             path, size);
  return read_body<uint16_t>(file.get(), size / 2, path);
}

void write_token_file(const std::string& path, std::span<const int32_t> tokens) {
  H2_CHECK(tokens.size() <= size_t(INT32_MAX), "{}: {} tokens do not fit the int32 header count",
           path, tokens.size());
  std::vector<uint16_t> raw(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    H2_CHECK(tokens[i] >= 0 && tokens[i] <= kTokenFileMaxToken,
             "{}: token {} at position {} does not fit the uint16 tokens of a .bin file", path,
             tokens[i], i);
    raw[i] = static_cast<uint16_t>(tokens[i]);
  }
  std::array<int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());

  File file(std::fopen(path.c_str(), "wb"));
  if (!file) H2_THROW(Error, "{}: cannot create token file: {}", path, std::strerror(errno));
  bool ok = std::fwrite(header.data(), 4, header.size(), file.get()) == header.size() &&
            (raw.empty() || std::fwrite(raw.data(), 2, raw.size(), file.get()) == raw.size());
  ok = (std::fclose(file.release()) == 0) && ok;
  if (!ok) H2_THROW(Error, "{}: writing the token file failed: {}", path, std::strerror(errno));
}

}  // namespace h2::data
