// fork/pipe/waitpid plumbing of the multi-process harness.
#include "multiproc.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "backends/registry.h"
#include "comm/bootstrap/store_server.h"
#include "comm/timeouts.h"
#include "core/error.h"

namespace h2::comm::testing {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void run_child(int rank, int size, int port, const std::string& token,
                            const RankBody& body, const RunOptions& options, int report_fd) {
  int code = 0;
  std::string message;
  try {
    setenv("UCX_TLS", options.ucx_tls.c_str(), 1);
    const auto own_timeout = options.comm_timeout_s_of_rank.find(rank);
    const double timeout_s = own_timeout != options.comm_timeout_s_of_rank.end()
                                 ? own_timeout->second
                                 : options.comm_timeout_s;
    setenv("H2_COMM_TIMEOUT", std::to_string(timeout_s).c_str(), 1);
    for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
    RankInfo info;
    info.rank = rank;
    info.size = size;
    info.local_rank = rank;
    info.local_size = size;
    info.launcher = "test";
    info.store_port = port;
    info.token = token;
    if (options.place) options.place(info);
    // The ranks share the machine's cores as h2 train's ranks do (cli/train_command.cpp): one
    // OpenMP team of every core per rank oversubscribes them and stalls the neighbours' barriers.
    RuntimeOptions runtime_options = RuntimeOptions::from_env();
    if (runtime_options.cpu.threads == 0)
      runtime_options.cpu.threads = std::max(1, usable_cpu_count() / size);
    auto runtime = create_runtime(runtime_options);
    WorldOptions world_options;
    world_options.serve_store = false;
    Device& device = runtime->device(options.device(rank));
    auto world = World::join(info, device, world_options);
    RankContext context{*world, *runtime, device};
    body(context);
  } catch (const std::exception& e) {
    code = 1;
    message = e.what();
  }
  if (!message.empty()) {
    ssize_t ignored = write(report_fd, message.data(), message.size());
    (void)ignored;
  }
  close(report_fd);
  _exit(code);  // no destructors of the harness's objects in the child
}

// Serves the job's store from a child forked before any rank, so that no rank is forked while a
// server thread of this process holds a lock (a forked child inherits locks, not their owners).
class StoreProcess {
 public:
  explicit StoreProcess(const std::string& token);
  ~StoreProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

StoreProcess::StoreProcess(const std::string& token) {
  int fds[2];
  H2_CHECK(pipe(fds) == 0, "pipe failed");
  const pid_t pid = fork();
  H2_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    close(fds[0]);
    try {
      StoreServer server("127.0.0.1", 0, token);
      const int served = server.port();
      ssize_t ignored = write(fds[1], &served, sizeof served);
      (void)ignored;
      close(fds[1]);
      for (;;) pause();  // until the harness kills it
    } catch (const std::exception&) {
      _exit(1);  // the parent sees no port and says so
    }
  }
  pid_ = pid;
  close(fds[1]);
  const bool got = read(fds[0], &port_, sizeof port_) == ssize_t(sizeof port_);
  close(fds[0]);
  H2_CHECK(got, "the store server process did not report its port");
}

// Every thread's stack of a rank that outlived the harness limit, to show where it hung.
std::string stacks_of(pid_t pid) {
  const std::string command =
      "gdb -p " + std::to_string(pid) + " -batch -ex 'thread apply all bt' 2>/dev/null";
  FILE* gdb = popen(command.c_str(), "r");
  if (gdb == nullptr) return "(no stacks: gdb could not be started)";
  std::string text;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, gdb)) > 0) text.append(buffer, got);
  pclose(gdb);
  return text.empty() ? "(no stacks: gdb is not installed)" : text;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, size_t(got));
  return text;
}

}  // namespace

std::vector<RankOutcome> run_ranks(int size, const RankBody& body, const RunOptions& options) {
  std::random_device seed;
  const std::string token = "test-" + std::to_string(seed()) + std::to_string(seed());
  const StoreProcess store(token);
  const auto start = Clock::now();
  std::vector<int> pids(size), pipes(size);
  for (int rank = 0; rank < size; ++rank) {
    int fds[2];
    H2_CHECK(pipe(fds) == 0, "pipe failed");
    const pid_t pid = fork();
    H2_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      close(fds[0]);
      run_child(rank, size, store.port(), token, body, options, fds[1]);
    }
    close(fds[1]);
    pids[rank] = pid;
    pipes[rank] = fds[0];
  }
  if (options.while_running) options.while_running(pids);

  std::vector<RankOutcome> outcomes(size);
  std::vector<bool> done(size, false);
  std::vector<std::string> stacks(size);
  int remaining = size;
  // Sanitizer builds run several times slower (tools/sanitize.sh sets the factor).
  const char* slack = std::getenv("H2_TEST_TIMING_SLACK");
  const int timing_slack = slack && std::atoi(slack) > 1 ? std::atoi(slack) : 1;
  while (remaining > 0) {
    for (int rank = 0; rank < size; ++rank) {
      if (done[rank]) continue;
      int status = 0;
      if (waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      done[rank] = true;
      --remaining;
      RankOutcome& outcome = outcomes[rank];
      outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
      outcome.message = read_all(pipes[rank]) + stacks[rank];
      close(pipes[rank]);
    }
    if (Clock::now() - start > options.harness_limit * timing_slack) {
      for (int rank = 0; rank < size; ++rank) {
        if (done[rank] || !stacks[rank].empty()) continue;
        stacks[rank] = "\nstacks when the harness gave up:\n" + stacks_of(pids[rank]);
        kill(pids[rank], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return outcomes;
}

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string text;
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    const RankOutcome& o = outcomes[rank];
    text += "rank " + std::to_string(rank) + ": ";
    if (o.signal != 0)
      text += "killed by signal " + std::to_string(o.signal);
    else if (o.exit_code == 0)
      text += "ok";
    else
      text += "exit " + std::to_string(o.exit_code) + " (" + o.message + ")";
    char after[32];
    std::snprintf(after, sizeof after, " after %.2f s", o.seconds);
    text += after;
    text += "\n";
  }
  return text;
}

void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.exit_code, 0) << describe(outcomes);
}

}  // namespace h2::comm::testing
