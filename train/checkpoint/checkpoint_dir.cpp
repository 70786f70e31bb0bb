// Checking, locking and tidying a checkpoint folder (see checkpoint_dir.h).
#include "train/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "core/error.h"
#include "train/checkpoint/durable_io.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/step_folders.h"

namespace h2::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLockFile = ".h2-train.lock";

bool has_manifest(const fs::path& folder) {
  std::error_code error;
  return fs::exists(folder / kManifest, error);
}

// Puts finished checkpoints in place and removes debris; see the header. Only names H2 writes
// are touched (step_N and .tmp_step_N, N decimal digits), and folders compare by their step.
void tidy(const fs::path& dir, const std::function<void(const std::string&)>& log) {
  std::error_code error;
  std::vector<fs::path> temporary;
  std::vector<StepFolder> incomplete;
  std::optional<StepFolder> newest_complete;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (!entry.is_directory(error)) continue;
    const std::string name = entry.path().filename().string();
    if (step_of_tmp_folder(name)) temporary.push_back(entry.path());
    const std::optional<int64_t> step = step_of_folder(name);
    if (!step) continue;
    if (!has_manifest(entry.path()))
      incomplete.push_back({*step, entry.path()});
    else if (!newest_complete || *step > newest_complete->step)
      newest_complete = StepFolder{*step, entry.path()};
  }
  for (const fs::path& tmp : temporary) {
    const int64_t step = *step_of_tmp_folder(tmp.filename().string());
    const fs::path final_dir = dir / step_folder_name(step);
    // The manifest is the last file a save writes: with it the folder is a whole checkpoint that
    // a kill stopped between its writing and its rename. (A step folder with a manifest is whole
    // too: a save retires the folder it replaces manifest first.)
    if (has_manifest(tmp) && !has_manifest(final_dir)) {
      fs::remove_all(final_dir, error);
      fs::rename(tmp, final_dir, error);
      if (error) {  // kept: the only copy of that step's state
        log(
            fmt::format("checkpoint: warning: {} is a complete checkpoint that could not be "
                        "renamed to {} ({}); it is left as it is, and resuming ignores it",
                        tmp.string(), final_dir.string(), error.message()));
        continue;
      }
      log(
          fmt::format("checkpoint: {} was complete but not renamed (a kill during the save); "
                      "it is now {}",
                      tmp.string(), final_dir.string()));
      if (!newest_complete || step > newest_complete->step)
        newest_complete = StepFolder{step, final_dir};
      std::erase_if(incomplete, [&](const StepFolder& f) { return f.path == final_dir; });
      continue;
    }
    fs::remove_all(tmp, error);
    log(fmt::format("checkpoint: removed {}, an unfinished save", tmp.string()));
  }
  for (const StepFolder& folder : incomplete) {
    if (newest_complete && folder.step < newest_complete->step) {  // a kill while pruning
      fs::remove_all(folder.path, error);
      log(fmt::format("checkpoint: removed {}, left half-pruned (no {})", folder.path.string(),
                      kManifest));
    } else {
      log(fmt::format(
          "checkpoint: warning: {} has no {} and is not a checkpoint; resuming "
          "ignores it{}",
          folder.path.string(), kManifest,
          newest_complete
              ? fmt::format(" (the newest complete one is {})", newest_complete->path.string())
              : ""));
    }
  }
  sync_directory(dir.string());
}

}  // namespace

CheckpointDir::CheckpointDir(const std::string& dir, const std::string& origin,
                             const std::function<void(const std::string&)>& log)
    : dir_(dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir))
    H2_THROW(ConfigError, "{}: cannot use '{}' as the checkpoint folder: {}", origin, dir,
             error ? error.message() : "it exists and is not a folder");
  const std::string lock_path = (fs::path(dir) / kLockFile).string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    H2_THROW(ConfigError, "{}: cannot write in the checkpoint folder '{}': {}", origin, dir,
             std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[256] = {};
    const ssize_t got = ::pread(lock_fd_, holder, sizeof(holder) - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    H2_THROW(ConfigError,
             "{}: the checkpoint folder '{}' is in use by another h2 train ({}); give this run "
             "its own checkpoint.dir or stop the other",
             origin, dir, got > 0 ? std::string(holder, size_t(got)) : "its holder is unknown");
  }
  char host[128] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string holder = fmt::format("pid {} on {}", ::getpid(), host);
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, holder.data(), holder.size(), 0) < 0) {
    // The lock holds without the note; only the message to a second trainer is poorer.
  }
  try {
    tidy(dir, log);
  } catch (...) {
    ::close(lock_fd_);  // the destructor of an object never constructed does not run
    throw;
  }
}

CheckpointDir::~CheckpointDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock; the file stays for the next run
}

void check_writable_file(const std::string& path, const std::string& origin) {
  std::error_code error;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, error);
  const bool existed = fs::exists(path, error);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    H2_THROW(ConfigError, "{}: cannot write '{}': {}", origin, path, std::strerror(errno));
  ::close(fd);
  if (!existed) fs::remove(path, error);
}

void check_could_write(const std::string& path, const std::string& origin, bool folder) {
  std::error_code error;
  fs::path existing = fs::absolute(path, error);
  if (fs::exists(existing, error)) {
    if (fs::is_directory(existing, error) != folder)
      H2_THROW(ConfigError, "{}: '{}' {}", origin, path,
               folder ? "exists and is not a folder" : "is a folder");
  } else {
    while (!existing.empty() && existing != existing.root_path() && !fs::exists(existing, error))
      existing = existing.parent_path();
    if (!fs::is_directory(existing, error))
      H2_THROW(ConfigError, "{}: cannot create '{}': '{}' is not a folder", origin, path,
               existing.string());
  }
  if (::access(existing.c_str(), W_OK) != 0)
    H2_THROW(ConfigError, "{}: cannot write '{}': {}", origin, existing.string(),
             std::strerror(errno));
}

}  // namespace h2::checkpoint
