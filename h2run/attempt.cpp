// run_attempt: the poll loop over the ranks' pipes and the signalfd, the failure rule and the
// two-stage stop.
#include "h2run/attempt.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "core/error.h"
#include "h2run/fd.h"

namespace h2::h2run {
namespace {

using Clock = std::chrono::steady_clock;

// The ranks of one attempt and the stop in progress.
class Watch {
 public:
  Watch(const std::vector<RankSpec>& specs, SignalFd& signals, double grace_s)
      : signals_(signals),
        grace_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s))),
        grace_s_(grace_s) {
    for (const RankSpec& spec : specs)
      ranks_.push_back(std::make_unique<RankProcess>(spec, signals.original_mask()));
  }

  AttemptOutcome run() {
    while (running() > 0) {
      wait_for_events();
      for (auto& rank : ranks_) rank->pump();
      for (int signal : signals_.take())
        if (signal == SIGINT || signal == SIGTERM || signal == SIGUSR1) on_interrupt(signal);
      for (auto& rank : ranks_) {
        if (!rank->try_reap()) continue;
        if (!rank->status()->ok() && !stopping()) on_failure(*rank);
        if (outcome_.interrupted_by != 0 && !outcome_.failed && !killed_on_request_ &&
            !stopped_cleanly(*rank))
          on_failure_during_stop(*rank);
      }
      if (kill_at_ && Clock::now() >= *kill_at_) kill_remaining(true);
    }
    return outcome_;
  }

 private:
  bool stopping() const { return outcome_.failed || outcome_.interrupted_by != 0; }

  int running() const {
    return int(std::count_if(ranks_.begin(), ranks_.end(), [](auto& r) { return r->running(); }));
  }

  void wait_for_events() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    for (const auto& rank : ranks_) rank->add_poll_fds(fds);
    int timeout_ms = 1000;  // SIGCHLD wakes the loop; this only bounds a missed wake-up
    if (kill_at_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at_ - Clock::now());
      timeout_ms = int(std::clamp<int64_t>(left.count(), 0, timeout_ms));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR)
      H2_THROW(Error, "poll over {} descriptors failed: {}", fds.size(), std::strerror(errno));
  }

  void signal_running(int signal) {
    for (auto& rank : ranks_)
      if (rank->running()) rank->signal(signal);
  }

  void say(const std::string& message) { write_all(2, "h2run: " + message + "\n"); }

  // The outcome names `rank`, ended, as the job's failure.
  void record_failure(const RankProcess& rank) {
    outcome_.failed = true;
    outcome_.rank = rank.rank();
    outcome_.pid = rank.pid();
    outcome_.status = *rank.status();
    outcome_.last_lines = rank.last_lines();
  }

  void on_failure(const RankProcess& rank) {
    record_failure(rank);
    outcome_.stopped = running();
    if (outcome_.stopped == 0) return;
    say(fmt::format("rank {} {}; stopping the other {} running rank{}", rank.rank(),
                    rank.status()->describe(), outcome_.stopped, outcome_.stopped == 1 ? "" : "s"));
    signal_running(SIGTERM);
    kill_at_ = Clock::now() + grace_;
  }

  // During a stop h2run passed on, a rank that ended otherwise than by it (its checkpoint write
  // failed, it crashed, it was killed after the grace): the job did not stop cleanly, and says
  // so instead of ending as a clean stop would. Not the ranks h2run killed because the user
  // asked a second time: that is the documented end of a stop (128 + signal).
  bool stopped_cleanly(const RankProcess& rank) const {
    const ExitStatus& status = *rank.status();
    return status.ok() || status.exit_code() == 128 + outcome_.interrupted_by;
  }

  void on_failure_during_stop(const RankProcess& rank) {
    record_failure(rank);
    outcome_.during_stop = true;
  }

  void on_interrupt(int signal) {
    if (stopping()) {  // a second request, or one during a stop: no more grace
      if (running() > 0)
        say(fmt::format("received {} during the stop: killing the ranks", signal_name(signal)));
      killed_on_request_ = true;
      kill_remaining(false);
      outcome_.interrupted_by = outcome_.interrupted_by != 0 ? outcome_.interrupted_by : signal;
      return;
    }
    outcome_.interrupted_by = signal;
    say(fmt::format("received {}; passing it on to the ranks (SIGKILL after {} s)",
                    signal_name(signal), grace_s_));
    signal_running(signal);
    kill_at_ = Clock::now() + grace_;
  }

  // `after_grace`: the grace period ran out (else the user asked twice); says so per rank.
  void kill_remaining(bool after_grace) {
    for (auto& rank : ranks_)
      if (rank->running()) {
        if (after_grace)
          say(fmt::format("rank {} did not stop within {} s: sending SIGKILL", rank->rank(),
                          grace_s_));
        rank->signal(SIGKILL);
      }
    kill_at_.reset();
  }

  SignalFd& signals_;
  Clock::duration grace_;
  double grace_s_;
  std::vector<std::unique_ptr<RankProcess>> ranks_;
  AttemptOutcome outcome_;
  std::optional<Clock::time_point> kill_at_;
  bool killed_on_request_ = false;  // a second stop signal: the ranks were killed at once
};

}  // namespace

AttemptOutcome run_attempt(const std::vector<RankSpec>& specs, SignalFd& signals, double grace_s) {
  return Watch(specs, signals, grace_s).run();
}

}  // namespace h2::h2run
