// Durable writes, whole-file reads and XXH3 checksums (see durable_io.h).
#include "train/checkpoint/durable_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <utility>

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
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
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

// Writes a new file through an aligned staging buffer, with O_DIRECT where the filesystem takes
// it: the bytes go to the disk without passing through the page cache. On the virtual machines
// here the page cache's first use of fresh pages cost 4.1 s of CPU for 1.9 GB (0.06 s with
// O_DIRECT, at 2.7 GB/s against 0.41): the difference between a background save that takes the
// training's cores and one that does not (docs/performance.md, "Checkpoint save"). Where O_DIRECT
// is refused (tmpfs) it writes through the page cache.
class StagedFileWriter {
 public:
  static constexpr size_t kAlign = 4096;                // O_DIRECT: offsets, sizes, addresses
  static constexpr size_t kStaging = size_t(16) << 20;  // bytes per write

  explicit StagedFileWriter(const std::string& path)
      : path_(path), fd_(open_direct(path)), staging_(allocate()) {}
  StagedFileWriter(const StagedFileWriter&) = delete;
  StagedFileWriter& operator=(const StagedFileWriter&) = delete;

  void append(const void* data, size_t bytes) {
    const auto* p = static_cast<const std::byte*>(data);
    while (bytes > 0) {
      const size_t n = std::min(bytes, kStaging - used_);
      std::memcpy(staging_.get() + used_, p, n);
      used_ += n;
      p += n;
      bytes -= n;
      if (used_ == kStaging) flush(kStaging);
    }
  }

  // The tail (padded to kAlign for O_DIRECT, then the file cut to its size), fsync, close. The
  // cut follows what was written, not whether O_DIRECT is still on: a filesystem that refuses
  // the padded tail's O_DIRECT write takes it through the page cache, padding and all.
  void finish() {
    const size_t size = size_t(written_) + used_;
    if (used_ > 0) {
      const size_t padded = direct_ ? (used_ + kAlign - 1) / kAlign * kAlign : used_;
      std::memset(staging_.get() + used_, 0, padded - used_);
      flush(padded);
    }
    if (size_t(written_) != size && ::ftruncate(fd_.get(), off_t(size)) != 0)
      H2_THROW(Error, "truncating '{}' to {} bytes failed: {}", path_, size, std::strerror(errno));
    if (::fsync(fd_.get()) != 0)
      H2_THROW(Error, "fsync of '{}' failed: {}", path_, std::strerror(errno));
    fd_.close(path_);
  }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };

  Fd open_direct(const std::string& path) {
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    const int fd = ::open(path.c_str(), flags | O_DIRECT, 0644);
    if (fd >= 0) return Fd(fd);
    direct_ = false;
    return Fd(path, flags);
  }

  static std::unique_ptr<std::byte, FreeDeleter> allocate() {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlign, kStaging));
    if (p == nullptr) throw std::bad_alloc();
    return std::unique_ptr<std::byte, FreeDeleter>(p);
  }

  // A filesystem that opened the file with O_DIRECT but refuses its writes: on through the page
  // cache (the bytes written so far stay).
  bool drop_direct() {
    const int flags = ::fcntl(fd_.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags & ~O_DIRECT) != 0) return false;
    direct_ = false;
    return true;
  }

  // Writes the first `bytes` of the staging buffer at the file's end.
  void flush(size_t bytes) {
    const std::byte* p = staging_.get();
    size_t left = bytes;
    while (left > 0) {
      const ssize_t wrote = ::write(fd_.get(), p, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote < 0 && errno == EINVAL && direct_ && drop_direct()) continue;
      if (wrote <= 0)
        H2_THROW(Error, "writing '{}' failed: {}", path_,
                 wrote < 0 ? std::strerror(errno) : "no progress (disk full?)");
      p += wrote;
      left -= size_t(wrote);
    }
    written_ += int64_t(bytes);
    used_ = 0;
  }

  std::string path_;
  bool direct_ = true;
  Fd fd_;
  std::unique_ptr<std::byte, FreeDeleter> staging_;
  size_t used_ = 0;      // bytes in the staging buffer
  int64_t written_ = 0;  // bytes written to the file (a whole number of kAlign while direct)
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
    StagedFileWriter file(tmp);
    ByteSink sink = [&](const void* data, size_t bytes) {
      XXH3_64bits_update(state.get(), data, bytes);
      file.append(data, bytes);
    };
    produce(sink);
    file.finish();
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
