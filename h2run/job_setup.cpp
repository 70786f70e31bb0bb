// find_executable, job_token and rank_environment.
#include "h2run/job_setup.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <random>
#include <utility>

#include "core/error.h"

namespace h2::h2run {

std::string find_executable(const std::string& command, const std::optional<std::string>& path) {
  if (command.find('/') != std::string::npos) {
    if (::access(command.c_str(), X_OK) != 0)
      H2_THROW(ConfigError, "command '{}' is not an executable file", command);
    return command;
  }
  const std::string dirs = path.value_or("/usr/local/bin:/usr/bin:/bin");
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  H2_THROW(ConfigError, "command '{}' not found on PATH ({})", command, dirs);
}

std::string job_token(const RunOptions& options, const std::optional<std::string>& from_env) {
  if (from_env && !from_env->empty()) return *from_env;
  if (options.nnodes > 1)
    H2_THROW(ConfigError,
             "--nnodes {} needs H2_JOB_TOKEN exported with the same secret on every node (e.g. "
             "export H2_JOB_TOKEN=$(openssl rand -hex 16)); h2run only invents one for a "
             "single-node job",
             options.nnodes);
  std::random_device random;
  std::array<uint32_t, 4> words{};
  for (uint32_t& word : words) word = random();
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", words[0], words[1], words[2], words[3]);
}

std::vector<std::string> rank_environment(const std::vector<std::string>& base,
                                          const RunOptions& options, const RankVars& vars) {
  std::vector<std::pair<const char*, std::string>> ours = {
      {"H2_RANK", std::to_string(options.node_rank * options.nproc + vars.local_rank)},
      {"H2_WORLD_SIZE", std::to_string(options.world_size())},
      {"H2_LOCAL_RANK", std::to_string(vars.local_rank)},
      {"H2_LOCAL_WORLD_SIZE", std::to_string(options.nproc)},
      {"H2_NODE_RANK", std::to_string(options.node_rank)},
      {"H2_STORE_ADDR", vars.store_addr},
      {"H2_JOB_TOKEN", vars.token},
      {"H2_RESTART", std::to_string(vars.attempt)},
  };
  if (!options.cluster.empty())
    ours.emplace_back("H2_CLUSTER_FILE", std::filesystem::absolute(options.cluster).string());
  // An outer launcher's placement of h2run itself (srun --mpi=pmix h2run, mpirun h2run) is not
  // its ranks': left in their environment, every rank but one found it disagreeing with
  // H2_RANK (comm/bootstrap/rank_env.cpp reads these). Slurm's own are skipped there already.
  constexpr const char* kOuterPlacement[] = {"OMPI_COMM_WORLD_RANK",
                                             "OMPI_COMM_WORLD_SIZE",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                                             "PMIX_RANK",
                                             "PMI_RANK",
                                             "PMI_SIZE",
                                             "MPI_LOCALRANKID",
                                             "MPI_LOCALNRANKS",
                                             "RANK",
                                             "WORLD_SIZE",
                                             "LOCAL_RANK",
                                             "LOCAL_WORLD_SIZE",
                                             "GROUP_RANK"};
  auto is_named = [](const std::string& entry, const char* name) {
    return entry.starts_with(std::string(name) + "=");
  };
  std::vector<std::string> env;
  env.reserve(base.size() + ours.size());
  for (const std::string& entry : base) {
    bool dropped = false;
    for (const auto& [name, value] : ours) dropped = dropped || is_named(entry, name);
    for (const char* name : kOuterPlacement) dropped = dropped || is_named(entry, name);
    if (!dropped) env.push_back(entry);
  }
  for (const auto& [name, value] : ours) env.push_back(fmt::format("{}={}", name, value));
  return env;
}

std::string host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace h2::h2run
