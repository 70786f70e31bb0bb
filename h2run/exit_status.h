// How a rank ended: an exit code or a signal, the words h2run reports it with, and the exit code
// h2run passes on (the code itself, or 128 + signal like a shell).
#pragma once

#include <string>

namespace h2::h2run {

struct ExitStatus {
  bool signaled = false;
  int value = 0;  // the exit code, or the signal number when `signaled`

  // From waitpid's status word (exited or killed; never stopped: h2run does not trace).
  static ExitStatus from_wait(int wait_status);

  bool ok() const { return !signaled && value == 0; }
  int exit_code() const { return signaled ? 128 + value : value; }
  // "exited with code 3", "was killed by signal 9 (SIGKILL: Killed)".
  std::string describe() const;
};

// "SIGKILL: Killed" (abbreviation and strsignal's description), "signal 77" when unknown.
std::string signal_words(int signal);
// "SIGKILL", "signal 77" when unknown.
std::string signal_name(int signal);

}  // namespace h2::h2run
