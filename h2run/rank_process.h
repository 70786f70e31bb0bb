// One rank of the job as a child process of h2run. The child runs in a process group of its own
// (so h2run can signal everything the rank started), dies with h2run (PR_SET_PDEATHSIG), reads
// /dev/null and writes into pipes that OutputPipe forwards. RAII: what the rank started dies with
// it (its group is killed when it is reaped), and destroying a RankProcess kills and reaps it.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "h2run/exit_status.h"
#include "h2run/output_pipe.h"

namespace h2::h2run {

struct RankSpec {
  int rank = 0;                   // global rank, for the output prefix and messages
  std::string executable;         // resolved path (see command_path.h)
  std::vector<std::string> argv;  // argv[0] is the command as the user wrote it
  std::vector<std::string> env;   // "NAME=value", the rank's whole environment
};

class RankProcess {
 public:
  // Number of lines kept for the failure report.
  static constexpr size_t kTailLines = 20;

  // Starts the rank. `child_mask`: the signal mask the child starts with (h2run's mask before it
  // blocked the signals it watches). Error naming the rank, the executable and the failed step
  // when it cannot start (fork, exec).
  RankProcess(const RankSpec& spec, const sigset_t& child_mask);
  // SIGKILL to the rank's process group and waits for the child, unless it was reaped already
  // (try_reap did both).
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !status_; }
  // How it ended; nullopt while running.
  const std::optional<ExitStatus>& status() const { return status_; }
  const std::deque<std::string>& last_lines() const { return tail_.lines(); }

  // Adds the open output pipes to `fds` (events POLLIN).
  void add_poll_fds(std::vector<pollfd>& fds) const;
  // Forwards the output available now.
  void pump();
  // Reaps the child if it ended: first SIGKILL to what it left in its process group, while its
  // zombie keeps the group's number from reuse; then forwards its remaining output and closes
  // the pipes. Returns true exactly once, when it reaped it.
  bool try_reap();
  // Sends `signal` to the rank's process group (the rank and whatever it started). A group that
  // is gone already is not an error; any other refusal is reported on stderr.
  void signal(int signal) const;

 private:
  int rank_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
  LineTail tail_{kTailLines};
  std::vector<OutputPipe> pipes_;  // stdout, stderr
};

}  // namespace h2::h2run
