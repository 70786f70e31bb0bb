// UniqueFd, make_pipe and write_all.
#include "h2run/fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace h2::h2run {

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);  // close errors on a pipe or /dev/null lose nothing we could keep
  fd_ = -1;
}

Pipe make_pipe(std::string_view what, bool nonblocking_read) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    H2_THROW(Error, "cannot create the pipe for {}: {}", what, std::strerror(errno));
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  if (nonblocking_read) {
    const int flags = ::fcntl(fds[0], F_GETFL);
    if (flags < 0 || ::fcntl(fds[0], F_SETFL, flags | O_NONBLOCK) != 0)
      H2_THROW(Error, "cannot make the pipe for {} (fd {}) non-blocking: {}", what, fds[0],
               std::strerror(errno));
  }
  return pipe;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

}  // namespace h2::h2run
