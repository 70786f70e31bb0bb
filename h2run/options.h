// h2run's command line: the flags (CLI11), their checks, and the command after `--`.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace h2::h2run {

struct RunOptions {
  int nproc = 0;            // -n: ranks on this node
  int nnodes = 1;           // --nnodes
  int node_rank = 0;        // --node-rank
  std::string master;       // --master HOST:PORT as given ("" when absent)
  std::string master_host;  // parsed from `master` (brackets of an IPv6 address removed)
  int master_port = 0;      // parsed from `master`
  int max_restarts = 0;     // --max-restarts
  double grace_s = 30;      // --grace: seconds between SIGTERM and SIGKILL when stopping ranks
  std::string cluster;      // --cluster FILE: passed to every rank as H2_CLUSTER_FILE (absolute)
  std::vector<std::string> command;  // after `--`

  int world_size() const { return nnodes * nproc; }
};

// Registers the flags on `app` (bound to `options`) with help text, usage and an example.
void add_run_flags(CLI::App& app, RunOptions& options);

// Splits argv at the first "--": returns what precedes it for CLI11 (argv[0] excluded) and sets
// `command` to what follows (empty when there is no "--").
std::vector<std::string> split_command(int argc, char** argv, std::vector<std::string>& command);

// After CLI11 parsed: takes the command and `extras` (arguments CLI11 did not recognise), checks
// every value and parses --master. ConfigError naming the value otherwise.
void finish_run_options(RunOptions& options, std::vector<std::string> command,
                        const std::vector<std::string>& extras);

// "HOST:PORT" or "[IPv6]:PORT" into host and port (1..65535). ConfigError naming `text` and
// `flag` when it is not.
void parse_host_port(const std::string& flag, const std::string& text, std::string& host,
                     int& port);

}  // namespace h2::h2run
