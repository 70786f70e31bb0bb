// Files that survive a crash: written under a temporary name, flushed to the disk (fsync) and
// renamed into place, with the directory entry flushed too, so a reader sees the old file or the
// whole new one, never a torn one. Also the XXH3-64 checksum every checkpoint file carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace h2::checkpoint {

// A sink the caller writes the file's bytes into, in order.
using ByteSink = std::function<void(const void* data, size_t bytes)>;

// Calls `produce(sink)` to write `path` durably (temporary file, fsync, rename, fsync of the
// directory). Returns the XXH3-64 checksum of every byte written. Error names the path.
uint64_t write_file_durably(const std::string& path, const std::function<void(ByteSink&)>& produce);

// The whole file. ConfigError naming the path when it cannot be read.
std::string read_file(const std::string& path);

// A file name read from a manifest or an index, checked to name a file inside its folder: a
// plain name (no '/', not "." or ".."), never a path that could lead out of it. ConfigError
// naming `where` (the file it came from) otherwise.
void check_plain_file_name(const std::string& name, const std::string& where);

// Flushes a directory's entries (after creating, renaming or removing inside it).
void sync_directory(const std::string& path);

uint64_t checksum(std::span<const std::byte> bytes);
std::string checksum_hex(uint64_t value);  // 16 lowercase hex digits

}  // namespace h2::checkpoint
