// The signals h2run acts on (SIGCHLD; SIGINT, SIGTERM and SIGUSR1, passed on to the ranks; SIGPIPE
// so that a closed stdout is a write error, not death), blocked and read from a signalfd in the
// supervisor's poll loop instead of handlers (their actions reset to the default first: an ignored
// SIGINT inherited from a shell's background job would otherwise never arrive). Construct it before
// any thread starts (the store server's): threads inherit the mask, so no thread takes these
// signals the default way.
#pragma once

#include <signal.h>

#include <vector>

#include "h2run/fd.h"

namespace h2::h2run {

class SignalFd {
 public:
  SignalFd();
  // Discards pending watched signals and restores the signal mask h2run started with.
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_.get(); }
  // The mask h2run started with: what its children get back before exec.
  const sigset_t& original_mask() const { return original_; }
  // The signals that arrived since the last call, in order (non-blocking; empty when none).
  std::vector<int> take();

 private:
  sigset_t original_;
  UniqueFd fd_;
};

}  // namespace h2::h2run
