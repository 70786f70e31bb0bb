// llm.c .bin token files: whole-file reader with header validation, and the matching writer.
// Both assume a little-endian host (checked at compile time), which is what the format stores.
#include "train/data/token_file.h"

#include <array>
#include <bit>
#include <cerrno>
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

}  // namespace

std::vector<int32_t> read_token_file(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) H2_THROW(ConfigError, "{}: cannot open token file: {}", path, std::strerror(errno));
  // Size from the open handle, so the check and the read see the same file.
  if (std::fseek(file.get(), 0, SEEK_END) != 0)
    H2_THROW(ConfigError, "{}: cannot seek (not a regular file?)", path);
  const long size = std::ftell(file.get());
  if (size < 0) H2_THROW(ConfigError, "{}: cannot determine the file size", path);
  std::rewind(file.get());
  if (size < kTokenFileHeaderBytes)
    H2_THROW(ConfigError,
             "{}: {} bytes is shorter than the {}-byte header of an llm.c .bin token file", path,
             size, kTokenFileHeaderBytes);

  std::array<int32_t, kTokenFileHeaderInts> header{};
  if (std::fread(header.data(), 4, header.size(), file.get()) != header.size())
    H2_THROW(ConfigError, "{}: cannot read the header", path);
  if (header[0] != kTokenFileMagic)
    H2_THROW(ConfigError, "{}: magic {} is not {} (not an llm.c .bin token file)", path, header[0],
             kTokenFileMagic);
  if (header[1] != kTokenFileVersion)
    H2_THROW(ConfigError, "{}: version {} is not supported (only version {}: uint16 tokens)", path,
             header[1], kTokenFileVersion);
  const int64_t declared = header[2];
  if (declared < 0) H2_THROW(ConfigError, "{}: header declares {} tokens", path, declared);
  const int64_t body_bytes = int64_t(size) - kTokenFileHeaderBytes;
  if (body_bytes != declared * 2) {
    if (body_bytes % 2 != 0)
      H2_THROW(ConfigError,
               "{}: header declares {} tokens but the file holds {} bytes after the header (an odd "
               "count: truncated or not uint16 tokens)",
               path, declared, body_bytes);
    H2_THROW(ConfigError, "{}: header declares {} tokens but the file holds {}", path, declared,
             body_bytes / 2);
  }

  std::vector<uint16_t> raw(static_cast<size_t>(declared));
  if (std::fread(raw.data(), 2, raw.size(), file.get()) != raw.size())
    H2_THROW(ConfigError, "{}: read fewer than the {} declared tokens", path, declared);
  return std::vector<int32_t>(raw.begin(), raw.end());
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
            std::fwrite(raw.data(), 2, raw.size(), file.get()) == raw.size();
  ok = (std::fclose(file.release()) == 0) && ok;
  if (!ok) H2_THROW(Error, "{}: writing the token file failed: {}", path, std::strerror(errno));
}

}  // namespace h2::data
