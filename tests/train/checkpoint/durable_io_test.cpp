// Durable file writes (train/checkpoint/durable_io.h): every size around the O_DIRECT alignment
// (4 KiB) and the staging buffer (16 MiB) comes back byte for byte with its XXH3 checksum and
// exact length, on a disk filesystem (O_DIRECT) and on tmpfs (which refuses O_DIRECT: the page
// cache path), and no temporary file is left behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

// n bytes of a pattern with no period near 4 KiB or 16 MiB, written in pieces of varied size.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = char(x >> 24);
  }
  return s;
}

void round_trip(const fs::path& dir, size_t n) {
  const std::string want = pattern(n);
  const fs::path path = dir / "file.bin";
  const uint64_t sum = write_file_durably(path.string(), [&](ByteSink& sink) {
    for (size_t at = 0, piece = 1; at < n; at += piece, piece = piece * 3 + 7)
      sink(want.data() + at, std::min(piece, n - at));
  });
  EXPECT_EQ(fs::file_size(path), n) << path;
  EXPECT_TRUE(read_file(path.string()) == want) << n << " bytes in " << dir;
  EXPECT_EQ(sum, checksum(std::as_bytes(std::span(want))));
  EXPECT_FALSE(fs::exists(dir / "file.bin.tmp"));
}

void every_size(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  const size_t mib16 = size_t(16) << 20;
  for (size_t n : {size_t(0), size_t(1), size_t(4095), size_t(4096), size_t(4097), size_t(100000),
                   mib16 - 1, mib16, mib16 + 1, 2 * mib16 + 4096 + 3})
    round_trip(dir, n);
  fs::remove_all(dir);
}

TEST(DurableIo, EverySizeRoundTripsOnADiskFilesystem) {
  every_size(fs::temp_directory_path() / "h2_durable_io");
}

TEST(DurableIo, EverySizeRoundTripsOnTmpfs) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  every_size(fs::path("/dev/shm") / "h2_durable_io_test");
}

}  // namespace
}  // namespace h2::checkpoint
