// Durable writes, whole-file reads and XXH3 checksums (see durable_io.h).
#include "train/checkpoint/durable_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace h2::checkpoint {
namespace {

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0644)
      : fd_(::open(path.c_str(), flags, mode)) {
    if (fd_ < 0) H2_THROW(Error, "cannot open '{}': {}", path, std::strerror(errno));
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting what close says (a deferred write error surfaces here).
  void close(const std::string& path) {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) H2_THROW(Error, "closing '{}' failed: {}", path, std::strerror(errno));
  }

 private:
  int fd_;
};

struct XxhStateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

}  // namespace

uint64_t write_file_durably(const std::string& path,
                            const std::function<void(ByteSink&)>& produce) {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<XXH3_state_t, XxhStateDeleter> state(XXH3_createState());
  H2_CHECK(state != nullptr && XXH3_64bits_reset(state.get()) == XXH_OK, "XXH3 state failed");
  {
    Fd file(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC);
    ByteSink sink = [&](const void* data, size_t bytes) {
      XXH3_64bits_update(state.get(), data, bytes);
      const char* p = static_cast<const char*>(data);
      while (bytes > 0) {
        ssize_t wrote = ::write(file.get(), p, bytes);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0)
          H2_THROW(Error, "writing '{}' failed: {}", tmp,
                   wrote < 0 ? std::strerror(errno) : "no progress (disk full?)");
        p += wrote;
        bytes -= size_t(wrote);
      }
    };
    produce(sink);
    if (::fsync(file.get()) != 0)
      H2_THROW(Error, "fsync of '{}' failed: {}", tmp, std::strerror(errno));
    file.close(tmp);
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) H2_THROW(Error, "renaming '{}' to '{}' failed: {}", tmp, path, error.message());
  sync_directory(std::filesystem::path(path).parent_path().string());
  return XXH3_64bits_digest(state.get());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) H2_THROW(ConfigError, "cannot open '{}'", path);
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) H2_THROW(ConfigError, "cannot read the size of '{}': {}", path, error.message());
  std::string bytes(size, '\0');
  in.read(bytes.data(), std::streamsize(size));
  if (!in) H2_THROW(ConfigError, "reading '{}' failed", path);
  return bytes;
}

void sync_directory(const std::string& path) {
  Fd dir(path.empty() ? "." : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (::fsync(dir.get()) != 0)
    H2_THROW(Error, "fsync of directory '{}' failed: {}", path, std::strerror(errno));
}

uint64_t checksum(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

std::string checksum_hex(uint64_t value) {
  return fmt::format("{:016x}", value);
}

void check_plain_file_name(const std::string& name, const std::string& where) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    H2_THROW(ConfigError, "{}: file name '{}' is not a plain name inside its folder", where, name);
}

}  // namespace h2::checkpoint
