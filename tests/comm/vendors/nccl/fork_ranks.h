// Test harness for communicators that need one process per rank (NCCL: one rank per GPU). The
// parent never touches CUDA (a child forked from a process that initialised CUDA cannot use it):
// it probes the GPU count in a child, then forks one child per rank, each creating its own
// runtime and joining through a FileStore (a Store over files in a temporary directory). A child
// reports failure by exception; the parent collects "rank r: message" per failed rank and kills
// children that outlive the deadline.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backends/registry.h"
#include "comm/comm_error.h"
#include "comm/store.h"
#include "core/error.h"

namespace h2::comm::testing {

// A Store over files: enough for set/get between processes of one machine.
class FileStore final : public Store {
 public:
  explicit FileStore(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::string& value) override {
    std::filesystem::path tmp = path(key).string() + ".tmp" + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(value.data(), std::streamsize(value.size()));
      H2_CHECK(out.good(), "file store: cannot write {}", tmp.string());
    }
    std::filesystem::rename(tmp, path(key));  // atomic: readers see all or nothing
  }
  std::string get(const std::string& key, Millis timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!std::filesystem::exists(path(key))) {
      if (std::chrono::steady_clock::now() > deadline)
        H2_THROW(CommError, "file store: get({}) timed out after {} ms", key, timeout.count());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::ifstream in(path(key), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  int64_t add(const std::string&, int64_t) override {
    H2_THROW(UnsupportedError, "file store: add is not implemented");
  }
  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    for (const std::string& key : keys) get(key, timeout);
  }
  std::string compare_set(const std::string&, const std::string&, const std::string&) override {
    H2_THROW(UnsupportedError, "file store: compare_set is not implemented");
  }

 private:
  std::filesystem::path path(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '%');
    return dir_ / key;
  }
  std::filesystem::path dir_;
};

struct RankContext {
  int rank;
  int size;
  Store& store;
  Runtime& runtime;
  Device& gpu;  // cuda:<rank>
};

// CUDA devices visible to a fresh process (probed in a child; 0 without CUDA backend or GPU).
inline int probe_gpu_count() {
  pid_t pid = fork();
  if (pid == 0) {
    int count = 0;
    try {
      std::unique_ptr<Runtime> runtime = create_runtime();
      Backend* cuda = runtime->backend("cuda");
      count = cuda != nullptr ? cuda->device_count() : 0;
    } catch (...) {
    }
    _exit(std::min(count, 100));
  }
  if (pid < 0) return 0;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

// Runs body in `size` forked ranks; returns one message per failed rank (empty: all passed).
inline std::vector<std::string> run_ranks(int size, const std::function<void(RankContext&)>& body,
                                          std::chrono::seconds limit = std::chrono::seconds(240)) {
  std::string pattern = (std::filesystem::temp_directory_path() / "h2_fork_ranks_XXXXXX").string();
  H2_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
  std::filesystem::path dir = pattern;
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  std::vector<std::string> failures;
  for (int rank = 0; rank < size; ++rank) {
    int fd[2];
    H2_CHECK(pipe(fd) == 0, "pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      std::string error;
      try {
        if (std::getenv("H2_COMM_TIMEOUT") == nullptr) setenv("H2_COMM_TIMEOUT", "60", 1);
        std::unique_ptr<Runtime> runtime = create_runtime();
        FileStore store(dir);
        RankContext context{rank, size, store, *runtime,
                            runtime->device(fmt::format("cuda:{}", rank))};
        body(context);
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (!error.empty()) {
        error.resize(std::min<size_t>(error.size(), 8192));
        (void)!write(fd[1], error.data(), error.size());
      }
      _exit(error.empty() ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0) {
      close(fd[0]);
      failures.push_back(fmt::format("rank {}: fork failed", rank));
      continue;
    }
    pids.push_back(pid);
    pipes.push_back(fd[0]);
  }
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> statuses(pids.size(), 0);
  std::vector<bool> exited(pids.size(), false), killed(pids.size(), false);
  for (;;) {
    size_t running = 0;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (!exited[i] && waitpid(pids[i], &statuses[i], WNOHANG) == pids[i]) exited[i] = true;
      running += !exited[i];
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (exited[i]) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], &statuses[i], 0);
        killed[i] = true;
        failures.push_back(fmt::format("rank {}: killed after {} s", i, limit.count()));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    std::string message;
    char buffer[4096];
    for (ssize_t n; (n = read(pipes[i], buffer, sizeof(buffer))) > 0;) message.append(buffer, n);
    close(pipes[i]);
    int s = statuses[i];
    if (!message.empty())
      failures.push_back(fmt::format("rank {}: {}", i, message));
    else if (!killed[i] && !(WIFEXITED(s) && WEXITSTATUS(s) == 0))
      failures.push_back(fmt::format("rank {}: exited abnormally (status {})", i, s));
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return failures;
}

}  // namespace h2::comm::testing
