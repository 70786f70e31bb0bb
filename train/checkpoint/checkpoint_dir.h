// The checkpoint folder of a training run, checked before any work: created when missing, a
// writable folder, held by one trainer at a time (an advisory lock that dies with the process),
// and tidied of what a crash left behind: a finished checkpoint that a kill stopped short of its
// rename is put in place, unfinished temporary folders and step folders that a kill left half
// pruned are removed, each with a log line.
#pragma once

#include <functional>
#include <string>

namespace h2::checkpoint {

class CheckpointDir {
 public:
  // `origin` says where the folder came from (the config key and file) for error messages;
  // `log` receives one line per folder tidied or suspicious. ConfigError when the folder cannot
  // be created or written, or another process holds it.
  CheckpointDir(const std::string& dir, const std::string& origin,
                const std::function<void(const std::string&)>& log);
  ~CheckpointDir();
  CheckpointDir(const CheckpointDir&) = delete;
  CheckpointDir& operator=(const CheckpointDir&) = delete;

  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

// Checks before any work that `path` (a metrics or trace file) can be written: creates its parent
// folders and opens it for appending, removing it again when it did not exist. ConfigError naming
// `origin` and the system's reason otherwise.
void check_writable_file(const std::string& path, const std::string& origin);

// The same checks touching nothing (a dry run): `path` (a folder when `folder`) exists as that
// kind and is writable, or the nearest folder above it that exists is writable.
void check_could_write(const std::string& path, const std::string& origin, bool folder);

}  // namespace h2::checkpoint
