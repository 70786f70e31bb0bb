// OutputPipe: split a rank's bytes into lines, prefix and forward them.
#include "h2run/output_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace h2::h2run {

void LineTail::add(std::string line) {
  lines_.push_back(std::move(line));
  while (lines_.size() > capacity_) lines_.pop_front();
}

OutputPipe::OutputPipe(UniqueFd fd, int target, std::string prefix, LineTail& tail)
    : fd_(std::move(fd)), target_(target), prefix_(std::move(prefix)), tail_(tail) {}

void OutputPipe::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  write_all(target_, out);  // h2run's own stdout gone (e.g. `| head`): the job still runs
  tail_.add(std::string(line));
}

void OutputPipe::flush_partial() {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
}

size_t OutputPipe::pump() {
  char buffer[16384];
  size_t got = 0;
  // At most a pipe's default capacity (64 KiB) per call: a rank that writes without pause would
  // otherwise keep this loop from returning, and the launcher from reaping, signalling and
  // timing out the others; poll() says when there is more.
  for (int reads = 0; reads < 4 && fd_.valid(); ++reads) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return got;
    if (n < 0)
      H2_THROW(Error, "reading the output of {}(fd {}) failed: {}", prefix_, fd_.get(),
               std::strerror(errno));
    if (n == 0) {
      flush_partial();
      fd_.reset();
      return got;
    }
    got += size_t(n);
    std::string_view chunk(buffer, size_t(n));
    while (!chunk.empty()) {
      const size_t newline = chunk.find('\n');
      const size_t take = newline == std::string_view::npos ? chunk.size() : newline;
      partial_.append(chunk.substr(0, take));
      if (newline != std::string_view::npos) {
        emit(partial_);
        partial_.clear();
        chunk.remove_prefix(take + 1);
      } else {
        chunk = {};
      }
      while (partial_.size() >= kMaxLine) {
        emit(std::string_view(partial_).substr(0, kMaxLine));
        partial_.erase(0, kMaxLine);
      }
    }
  }
  return got;
}

void OutputPipe::finish() {
  // What the rank wrote before it ended: at most its pipe's capacity, which may exceed what one
  // pump() takes (pipes enlarged with F_SETPIPE_SZ; 1 MiB by default where pages are 64 KiB).
  // Bounded, since a process the rank left behind may still be writing.
  const int capacity = fd_.valid() ? ::fcntl(fd_.get(), F_GETPIPE_SZ) : 0;
  size_t left = capacity > 0 ? size_t(capacity) : size_t(64) << 10;
  while (fd_.valid()) {
    const size_t got = pump();
    if (got == 0 || got >= left) break;
    left -= got;
  }
  flush_partial();
  fd_.reset();
}

}  // namespace h2::h2run
