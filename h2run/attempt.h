// One start of the job on this node: spawn every local rank, forward their output, and watch them
// until all have ended. The first rank to exit non-zero or die makes h2run stop the others
// (SIGTERM, then SIGKILL after the grace period); SIGINT, SIGTERM or SIGUSR1 to h2run is passed on
// to the ranks the same way, and a second one skips the grace period.
#pragma once

#include <sys/types.h>

#include <deque>
#include <string>
#include <vector>

#include "h2run/exit_status.h"
#include "h2run/rank_process.h"
#include "h2run/signal_fd.h"

namespace h2::h2run {

struct AttemptOutcome {
  // A rank exited non-zero or was killed, before any stop h2run began, or during one otherwise
  // than by the signal passed on (`during_stop`).
  bool failed = false;
  bool during_stop = false;
  int rank = -1;  // the failing rank (global)
  pid_t pid = -1;
  ExitStatus status;  // how it ended
  std::deque<std::string> last_lines;
  int stopped = 0;         // other ranks still running when the failure was noticed
  int interrupted_by = 0;  // SIGINT, SIGTERM or SIGUSR1 h2run received, 0 if none
};

AttemptOutcome run_attempt(const std::vector<RankSpec>& specs, SignalFd& signals, double grace_s);

}  // namespace h2::h2run
