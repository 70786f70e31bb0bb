// The whole job on this node: serve the rendezvous store (node 0), run attempts of the job, report
// a failed rank, restart while --max-restarts allows, and choose h2run's exit code.
#pragma once

#include <string>
#include <vector>

#include "h2run/options.h"
#include "h2run/signal_fd.h"

namespace h2::h2run {

struct JobSetup {
  RunOptions options;
  std::string executable;             // options.command[0] resolved on PATH
  std::string token;                  // H2_JOB_TOKEN for every rank and the store
  std::vector<std::string> base_env;  // h2run's environment, "NAME=value"
};

// Returns h2run's exit code: 0 when every rank exited 0; the failing rank's exit code (128 +
// signal when it was killed) after the last allowed restart; 128 + signal when h2run itself was
// interrupted. Errors of h2run's own (store address in use, fork) propagate.
int run_job(const JobSetup& job, SignalFd& signals);

}  // namespace h2::h2run
