// run_job: the store per attempt, the ranks' specs, the failure report and the restart rule.
#include "h2run/supervisor.h"

#include <fmt/format.h>

#include <memory>

#include "comm/bootstrap/store_server.h"
#include "h2run/attempt.h"
#include "h2run/fd.h"
#include "h2run/job_setup.h"

namespace h2::h2run {
namespace {

// Node 0 serves the store for one attempt (a restart gets a fresh one: no keys of the failed
// attempt survive). Other nodes connect to --master.
struct AttemptStore {
  std::unique_ptr<comm::StoreServer> server;
  std::string address;  // H2_STORE_ADDR
};

AttemptStore start_store(const JobSetup& job) {
  const RunOptions& options = job.options;
  AttemptStore store;
  if (options.node_rank != 0) {
    store.address = host_port(options.master_host, options.master_port);
    return store;
  }
  const std::string host = options.master.empty() ? "127.0.0.1" : options.master_host;
  store.server = std::make_unique<comm::StoreServer>(host, options.master_port, job.token);
  store.address = host_port(host, store.server->port());
  return store;
}

std::vector<RankSpec> rank_specs(const JobSetup& job, const std::string& store_address,
                                 int attempt) {
  std::vector<RankSpec> specs;
  for (int local = 0; local < job.options.nproc; ++local) {
    RankSpec spec;
    spec.rank = job.options.node_rank * job.options.nproc + local;
    spec.executable = job.executable;
    spec.argv = job.options.command;
    spec.env =
        rank_environment(job.base_env, job.options, {local, attempt, store_address, job.token});
    specs.push_back(std::move(spec));
  }
  return specs;
}

// "h2run: rank 1 (node 0, local rank 1, pid 4242) was killed by signal 9 (SIGKILL: Killed); 2
// other ranks were stopped" and the rank's last lines.
std::string failure_report(const RunOptions& options, const AttemptOutcome& outcome) {
  std::string report = fmt::format(
      "h2run: rank {} (node {}, local rank {}, pid {}) {}", outcome.rank, options.node_rank,
      outcome.rank - options.node_rank * options.nproc, outcome.pid, outcome.status.describe());
  if (outcome.during_stop)
    report += fmt::format(" while stopping on {} (a clean stop exits {})",
                          signal_name(outcome.interrupted_by), 128 + outcome.interrupted_by);
  if (outcome.stopped > 0)
    report += fmt::format("; {} other rank{} stopped", outcome.stopped,
                          outcome.stopped == 1 ? " was" : "s were");
  report += "\n";
  if (outcome.last_lines.empty()) {
    report += fmt::format("h2run: rank {} printed nothing\n", outcome.rank);
    return report;
  }
  report += fmt::format("h2run: last {} line{} of rank {}:\n", outcome.last_lines.size(),
                        outcome.last_lines.size() == 1 ? "" : "s", outcome.rank);
  for (const std::string& line : outcome.last_lines)
    report += fmt::format("h2run:   [rank {}] {}\n", outcome.rank, line);
  return report;
}

}  // namespace

int run_job(const JobSetup& job, SignalFd& signals) {
  const RunOptions& options = job.options;
  for (int attempt = 0;; ++attempt) {
    AttemptOutcome outcome;
    {
      AttemptStore store = start_store(job);
      outcome = run_attempt(rank_specs(job, store.address, attempt), signals, options.grace_s);
    }
    if (outcome.failed) write_all(2, failure_report(options, outcome));
    if (outcome.interrupted_by != 0) {
      write_all(2, fmt::format("h2run: stopped by {}\n", signal_name(outcome.interrupted_by)));
      return outcome.failed ? outcome.status.exit_code() : 128 + outcome.interrupted_by;
    }
    if (!outcome.failed) return 0;
    if (attempt >= options.max_restarts) return outcome.status.exit_code();
    write_all(
        2, fmt::format("h2run: restarting the job (attempt {} of {}) after rank {} {}\n",
                       attempt + 1, options.max_restarts, outcome.rank, outcome.status.describe()));
  }
}

}  // namespace h2::h2run
