// File descriptors for h2run: an owning handle that closes on destruction, pipes created
// close-on-exec, and a write that delivers every byte.
#pragma once

#include <string_view>
#include <utility>

namespace h2::h2run {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// A pipe with both ends close-on-exec, the read end non-blocking when `nonblocking_read`. Error
// naming `what` (e.g. "rank 3 stdout") when the system refuses.
Pipe make_pipe(std::string_view what, bool nonblocking_read);

// Writes all of `data` to `fd`, retrying after EINTR and short writes. Returns false when the
// reader is gone (EPIPE) or the descriptor fails; h2run keeps supervising without its output.
bool write_all(int fd, std::string_view data);

}  // namespace h2::h2run
