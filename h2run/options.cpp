// RunOptions: flags, help text and checks.
#include "h2run/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <memory>

#include "core/error.h"

namespace h2::h2run {
namespace {

constexpr const char* kFooter =
    R"(The command after `--` runs once per rank, looked up on PATH, with stdin from /dev/null.
Each rank's stdout and stderr lines reach h2run's stdout and stderr as "[rank R] line".
Environment of every rank: H2_RANK (node_rank * n + local rank), H2_WORLD_SIZE (nnodes * n),
H2_LOCAL_RANK, H2_LOCAL_WORLD_SIZE (n), H2_NODE_RANK, H2_STORE_ADDR (HOST:PORT of the
rendezvous store h2run serves on node 0), H2_JOB_TOKEN (the store's secret: taken from the
environment, else random on one node; several nodes need the same H2_JOB_TOKEN exported on every
node) and H2_RESTART (0, then 1, 2, ... after each restart).

When a rank exits non-zero or is killed, h2run stops the others (SIGTERM, then SIGKILL after
--grace seconds), prints which rank failed, how, and its last 20 lines, then restarts the job if
--max-restarts allows, or exits with the rank's exit code (128 + signal when killed). SIGINT,
SIGTERM and SIGUSR1 sent to h2run are passed on to the ranks, which `h2 train` takes as a stop:
it ends the current step, writes a checkpoint and exits 128 + signal; h2run waits --grace
seconds for that, then sends SIGKILL (a second signal kills at once). Exit code 2: bad usage.

Examples:
  h2run -n 4 -- h2 train configs/train/hetero-4.yaml
  h2run -n 8 --cluster configs/clusters/mixed-8.yaml -- h2 train run.yaml --set parallel.plan=auto
  h2run -n 2 --max-restarts 3 --grace 10 -- h2 train run.yaml --set checkpoint.every=100
  H2_JOB_TOKEN=$SECRET h2run -n 8 --nnodes 2 --node-rank 0 --master node0:29500 -- h2 train run.yaml
  H2_JOB_TOKEN=$SECRET h2run -n 8 --nnodes 2 --node-rank 1 --master node0:29500 -- h2 train run.yaml)";

// CLI11's usage line would read "h2run [OPTIONS]": the command after `--` is the point.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: h2run -n N [--cluster FILE] [--nnodes K --node-rank R --master HOST:PORT] "
           "[--max-restarts M] [--grace S] -- COMMAND [ARGS...]\n";
  }
};

std::string joined(const std::vector<std::string>& words) {
  return fmt::format("{}", fmt::join(words, " "));
}

}  // namespace

void add_run_flags(CLI::App& app, RunOptions& options) {
  app.description(
      "h2run: start the ranks of an H2 job on this node, forward their output, stop and restart "
      "them together.");
  app.formatter(std::make_shared<UsageFormatter>());
  app.add_option("-n,--nproc-per-node", options.nproc, "ranks to start on this node (e.g. -n 4)")
      ->required();
  app.add_option("--nnodes", options.nnodes,
                 "nodes in the job, each running one h2run (default 1)");
  app.add_option("--node-rank", options.node_rank,
                 "this node's index, 0 .. nnodes-1 (default 0); node 0 serves the store");
  app.add_option("--master", options.master,
                 "HOST:PORT where node 0's store listens (e.g. node0:29500, [fd00::1]:29500); "
                 "required with --nnodes > 1, default 127.0.0.1 and a free port");
  app.add_option("--max-restarts", options.max_restarts,
                 "restart the whole job up to M times after a rank fails (default 0); ranks see "
                 "H2_RESTART=attempt and resume from their newest checkpoint");
  app.add_option(
      "--grace", options.grace_s,
      "seconds a stopping rank gets between the stop signal and SIGKILL: time to finish its step "
      "and write a checkpoint (default 30, Slurm's KillWait)");
  app.add_option("--cluster", options.cluster,
                 "cluster file (configs/clusters/*.yaml): rank r drives the cluster's chip r "
                 "(virtual chips, links paced as the file says); passed on as H2_CLUSTER_FILE")
      ->check(CLI::ExistingFile);
  app.allow_extras();
  app.footer(kFooter);
}

std::vector<std::string> split_command(int argc, char** argv, std::vector<std::string>& command) {
  std::vector<std::string> flags;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) flags.emplace_back(argv[i]);
  command.clear();
  for (++i; i < argc; ++i) command.emplace_back(argv[i]);
  return flags;
}

void parse_host_port(const std::string& flag, const std::string& text, std::string& host,
                     int& port) {
  const std::string expected = "expected HOST:PORT, e.g. 10.0.0.1:29500 or [fd00::1]:29500";
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size())
    H2_THROW(ConfigError, "{} '{}' has no port ({})", flag, text, expected);
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos)
    H2_THROW(ConfigError, "{} '{}': write an IPv6 address in brackets ({})", flag, text, expected);
  if (host.empty()) H2_THROW(ConfigError, "{} '{}' has no host ({})", flag, text, expected);
  const std::string digits = text.substr(colon + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535)
    H2_THROW(ConfigError, "{} '{}': port '{}' is not in 1..65535", flag, text, digits);
}

void finish_run_options(RunOptions& options, std::vector<std::string> command,
                        const std::vector<std::string>& extras) {
  if (!extras.empty())
    H2_THROW(ConfigError,
             "unexpected arguments before '--': '{}' (the command goes after '--': h2run -n 2 -- "
             "h2 train CONFIG.yaml)",
             joined(extras));
  if (command.empty())
    H2_THROW(ConfigError, "no command: write it after '--' (h2run -n 2 -- h2 train CONFIG.yaml)");
  options.command = std::move(command);
  if (options.nproc < 1) H2_THROW(ConfigError, "-n {}: a node runs at least 1 rank", options.nproc);
  if (options.nnodes < 1)
    H2_THROW(ConfigError, "--nnodes {}: a job has at least 1 node", options.nnodes);
  if (options.node_rank < 0 || options.node_rank >= options.nnodes)
    H2_THROW(ConfigError, "--node-rank {} is not in 0..{} (--nnodes {})", options.node_rank,
             options.nnodes - 1, options.nnodes);
  if (options.max_restarts < 0)
    H2_THROW(ConfigError, "--max-restarts {} is negative", options.max_restarts);
  if (!std::isfinite(options.grace_s) || options.grace_s < 0 || options.grace_s > 3600)
    H2_THROW(ConfigError, "--grace {} is not a number of seconds in 0..3600", options.grace_s);
  if (options.nnodes > 1 && options.master.empty())
    H2_THROW(ConfigError,
             "--nnodes {} needs --master HOST:PORT (node 0's address, where its h2run serves the "
             "store; the same on every node)",
             options.nnodes);
  if (!options.master.empty())
    parse_host_port("--master", options.master, options.master_host, options.master_port);
  if (int64_t(options.nnodes) * options.nproc > 1'000'000)
    H2_THROW(ConfigError, "--nnodes {} x -n {} ranks is more than h2run supports (1000000)",
             options.nnodes, options.nproc);
}

}  // namespace h2::h2run
