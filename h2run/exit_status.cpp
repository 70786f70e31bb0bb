// ExitStatus: decoding waitpid's status and naming signals.
#include "h2run/exit_status.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstring>

namespace h2::h2run {

ExitStatus ExitStatus::from_wait(int wait_status) {
  if (WIFSIGNALED(wait_status)) return {true, WTERMSIG(wait_status)};
  return {false, WEXITSTATUS(wait_status)};
}

std::string ExitStatus::describe() const {
  if (signaled) return fmt::format("was killed by signal {} ({})", value, signal_words(value));
  return fmt::format("exited with code {}", value);
}

std::string signal_words(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  const char* description = ::strsignal(signal);
  if (abbreviation == nullptr) return fmt::format("signal {}", signal);
  return fmt::format("SIG{}: {}", abbreviation, description != nullptr ? description : "?");
}

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation != nullptr ? fmt::format("SIG{}", abbreviation)
                                 : fmt::format("signal {}", signal);
}

}  // namespace h2::h2run
