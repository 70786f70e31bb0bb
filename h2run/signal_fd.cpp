// SignalFd: sigprocmask + signalfd.
#include "h2run/signal_fd.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace h2::h2run {

SignalFd::SignalFd() {
  sigset_t watched;
  sigemptyset(&watched);
  for (int signal : {SIGCHLD, SIGINT, SIGTERM, SIGUSR1, SIGPIPE}) sigaddset(&watched, signal);
  if (::sigprocmask(SIG_BLOCK, &watched, &original_) != 0)
    H2_THROW(Error, "cannot block SIGCHLD, SIGINT, SIGTERM, SIGUSR1 and SIGPIPE: {}",
             std::strerror(errno));
  // An inherited SIG_IGN would discard these before the signalfd sees them (and SIGCHLD ignored
  // makes the kernel reap the ranks): h2run takes them whatever its parent chose. Blocked, the
  // default action never runs; the ranks start with it.
  for (int signal : {SIGCHLD, SIGINT, SIGTERM, SIGUSR1}) {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    if (::sigaction(signal, &action, nullptr) != 0)
      H2_THROW(Error, "cannot reset the action of signal {}: {}", signal, std::strerror(errno));
  }
  fd_ = UniqueFd(::signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) {
    const int error = errno;
    ::sigprocmask(SIG_SETMASK, &original_, nullptr);
    H2_THROW(Error,
             "cannot create a signalfd for SIGCHLD, SIGINT, SIGTERM, SIGUSR1 and SIGPIPE: {}",
             std::strerror(error));
  }
}

SignalFd::~SignalFd() {
  // Consume what is pending first: unblocking a pending SIGPIPE (stdout closed) or SIGCHLD is
  // harmless for SIGCHLD but would end h2run with the wrong status for SIGPIPE.
  signalfd_siginfo info[16];
  while (::read(fd_.get(), info, sizeof(info)) > 0) {
  }
  fd_.reset();
  ::sigprocmask(SIG_SETMASK, &original_, nullptr);
}

std::vector<int> SignalFd::take() {
  std::vector<int> signals;
  signalfd_siginfo info[16];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return signals;
    if (n <= 0)
      H2_THROW(Error, "reading the signalfd (fd {}) failed: {}", fd_.get(), std::strerror(errno));
    for (size_t i = 0; i < size_t(n) / sizeof(signalfd_siginfo); ++i)
      signals.push_back(int(info[i].ssi_signo));
  }
}

}  // namespace h2::h2run
