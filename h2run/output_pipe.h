// One output stream of a rank: h2run reads the rank's end of a pipe and writes every complete line
// to its own stdout or stderr as "[rank R] line" (one write per line, so ranks never interleave
// inside a line), remembering the rank's last lines for the failure report.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "h2run/fd.h"

namespace h2::h2run {

// The last `capacity` lines a rank printed, on either stream, in arrival order.
class LineTail {
 public:
  explicit LineTail(size_t capacity) : capacity_(capacity) {}
  void add(std::string line);
  const std::deque<std::string>& lines() const { return lines_; }

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

class OutputPipe {
 public:
  // A line longer than this is forwarded in pieces of this size.
  static constexpr size_t kMaxLine = 64 * 1024;

  // `fd`: the non-blocking read end; `target`: 1 or 2; `prefix`: "[rank R] ".
  OutputPipe(UniqueFd fd, int target, std::string prefix, LineTail& tail);

  bool open() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // Forwards what can be read now, up to 64 KiB (the launcher's loop comes back while there is
  // more); returns the bytes read. At end of file, forwards the unterminated last line and
  // closes.
  size_t pump();
  // Forwards up to the pipe's capacity, what the rank wrote before it ended, then any
  // unterminated line, and closes even if writers remain (a rank's leftover background
  // process): called once the rank itself was reaped.
  void finish();

 private:
  void emit(std::string_view line);
  void flush_partial();

  UniqueFd fd_;
  int target_;
  std::string prefix_;
  LineTail& tail_;
  std::string partial_;  // bytes after the last newline
};

}  // namespace h2::h2run
