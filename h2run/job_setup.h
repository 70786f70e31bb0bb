// What h2run works out once before starting ranks: the executable to run (PATH lookup), the job
// token, and each rank's environment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "h2run/options.h"

namespace h2::h2run {

// `command` as execve needs it: unchanged when it contains '/', else the first executable
// PATH entry holding it (an empty entry is the current directory). ConfigError naming the
// command and PATH when there is none.
std::string find_executable(const std::string& command, const std::optional<std::string>& path);

// The job token: `from_env` (H2_JOB_TOKEN) when set and non-empty; else, on one node, 128 random
// bits (std::random_device) in hex. Several nodes without it: ConfigError (every node must present
// the same secret, so h2run cannot invent it).
std::string job_token(const RunOptions& options, const std::optional<std::string>& from_env);

// The variables that make a process rank `local_rank` of this node (see rank_env.h, launcher
// "h2run").
struct RankVars {
  int local_rank = 0;
  int attempt = 0;         // H2_RESTART
  std::string store_addr;  // H2_STORE_ADDR, HOST:PORT
  std::string token;       // H2_JOB_TOKEN
};

// `base` ("NAME=value" entries, h2run's own environment) with the H2_* variables of the rank set,
// replacing any inherited value, and without an outer launcher's rank variables (PMIX_RANK,
// OMPI_COMM_WORLD_RANK, RANK, ...), which describe h2run's own place, not the rank's.
std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const RunOptions& options, const RankVars& vars);

// HOST:PORT, IPv6 hosts in brackets.
std::string host_port(const std::string& host, int port);

}  // namespace h2::h2run
