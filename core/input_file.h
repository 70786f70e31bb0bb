// Reading a small input file whole (a config, plan, chip or cluster file): it must be a regular
// file (not a folder, a FIFO or a device such as /dev/zero, which would read forever) of at most
// a cap that no real input comes near, so a wrong path or a hostile file is refused at once,
// with its size, instead of being parsed for minutes in gigabytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace h2 {

inline constexpr size_t kMaxInputFileBytes = size_t(4) << 20;  // the largest shipped is 4 KB

// The file's bytes. ConfigError naming `what` (the key or role: "config file", "parallel.plan")
// and the path when it is missing, not a regular file, larger than `max_bytes` or unreadable.
std::string read_input_file(const std::string& path, std::string_view what,
                            size_t max_bytes = kMaxInputFileBytes);

}  // namespace h2
