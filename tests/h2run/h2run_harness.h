// Runs the built h2run binary as a child of the test: a clean environment (no inherited H2_*
// variables), stdout and stderr captured in files, a bounded wait, and helpers for the pid files
// the toy rank scripts write.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace h2::testing {

struct RunResult {
  int exit_code = -1;  // 128 + signal when h2run itself was killed
  std::string out;
  std::string err;
  double seconds = 0;  // wall time from start to exit
};

// A started h2run. The destructor kills it (SIGKILL) if the test did not wait for it.
class H2runProcess {
 public:
  // `args` follow the program name; `env` adds "NAME=value" entries to the cleaned environment.
  // `program` is the built h2run unless named (a bare name is looked up in PATH, e.g. mpirun).
  H2runProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
               const std::string& program = H2RUN_PATH);
  ~H2runProcess();
  H2runProcess(const H2runProcess&) = delete;
  H2runProcess& operator=(const H2runProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits up to `timeout_s` (then kills h2run and fails the test) and collects the output.
  RunResult wait(double timeout_s = 60);

 private:
  pid_t pid_ = -1;
  std::string dir_;  // holds out.txt and err.txt
  double start_ = 0;
};

RunResult run_h2run(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                    double timeout_s = 60);

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Waits up to `timeout_s` for `path` to exist and returns the integer it holds (-1 on timeout).
int wait_for_pid_file(const std::string& path, double timeout_s = 20);
// A shell command for a rank's script that writes the shell's pid to DIR/rN, N its H2_RANK:
// written aside and renamed, so that wait_for_pid_file never reads half a number.
std::string write_rank_pid(const std::string& dir);

// False when `pid` is gone or a zombie (dead, not yet reaped by its new parent).
bool process_alive(pid_t pid);
// Waits up to `timeout_s` for process_alive(pid) to turn false; whether it did. For processes
// that h2run cannot reap (a rank's own children): a SIGKILL sent to their group is delivered
// at once, but the process may still be exiting when h2run returns.
bool gone_within(pid_t pid, double timeout_s);

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

}  // namespace h2::testing
