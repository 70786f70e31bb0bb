// The handlers of StopSignals (see stop_signals.h). Everything a handler does is async-signal-safe:
// a lock-free compare-exchange, write(2) of a fixed message, _exit(2).
#include "train/stop_signals.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace h2::train {
namespace {

constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGUSR1};

std::atomic<int> received_signal{0};  // the process-wide state a handler can reach
std::atomic<int64_t> first_at_ns{0};  // CLOCK_MONOTONIC when the first one came
std::atomic<bool> installed{false};   // one StopSignals at a time
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);

// A repeat this soon after the first is the same stop delivered twice, not a second request:
// Slurm signals every process of a job step, so each rank gets SIGTERM from Slurm and again from
// h2run, which passes its own on; a person asking twice takes longer than this.
constexpr int64_t kSameStopNs = 1'000'000'000;

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

void say(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_stop_signal(int signal) {
  const int64_t now = monotonic_ns();
  int64_t unset = 0;  // first: a signal that interrupts this handler sees when the stop began
  first_at_ns.compare_exchange_strong(unset, now);
  int none = 0;
  if (!received_signal.compare_exchange_strong(none, signal)) {
    if (now - first_at_ns.load() < kSameStopNs) {
      say("h2 train: the stop signal again within 1 s, taken for the same one (a launcher "
          "passing on what this rank also received): still stopping after this step with a "
          "checkpoint\n");
      return;
    }
    say("h2 train: second stop signal: exiting now (the last checkpoint is kept)\n");
    ::_exit(128 + signal);
  }
  say(signal == SIGINT    ? "h2 train: SIGINT: stopping after this step with a checkpoint "
                            "(again after a second to exit at once)\n"
      : signal == SIGTERM ? "h2 train: SIGTERM: stopping after this step with a checkpoint "
                            "(again after a second to exit at once)\n"
                          : "h2 train: SIGUSR1: stopping after this step with a checkpoint "
                            "(again after a second to exit at once)\n");
}

}  // namespace

StopSignals::StopSignals() {
  if (installed.exchange(true))
    H2_THROW(Error, "a StopSignals is already installed in this process");
  received_signal = 0;
  first_at_ns = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls resume; the loop checks between steps
  for (int i = 0; i < 3; ++i)
    if (::sigaction(kStopSignals[i], &action, &previous_[i]) != 0) {
      const int err = errno;
      for (int j = 0; j < i; ++j) ::sigaction(kStopSignals[j], &previous_[j], nullptr);
      installed = false;
      H2_THROW(Error, "cannot install the handler of {}: {}", stop_signal_name(kStopSignals[i]),
               std::strerror(err));
    }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
  installed = false;
}

int StopSignals::received() const {
  return received_signal.load();
}

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

}  // namespace h2::train
