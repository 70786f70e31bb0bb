// H2runProcess: fork + exec of H2RUN_PATH (or another program) with output redirected to files; pid
// and port helpers.
#include "tests/h2run/h2run_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace h2::testing {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TempDir::TempDir() {
  std::string pattern = "/tmp/h2run_test_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

H2runProcess::H2runProcess(const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::string& program) {
  std::string pattern = "/tmp/h2run_output_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern << " failed";
  dir_ = pattern;
  std::vector<std::string> strings{program};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (std::string(*entry).rfind("H2_", 0) != 0) env_strings.emplace_back(*entry);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> argv, envp;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string out = dir_ + "/out.txt", err = dir_ + "/err.txt";
  start_ = now_s();
  pid_ = ::fork();
  if (pid_ == 0) {
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out_fd < 0 || err_fd < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(120);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(121);
  }
  if (pid_ < 0) ADD_FAILURE() << "fork failed";
}

H2runProcess::~H2runProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

RunResult H2runProcess::wait(double timeout_s) {
  RunResult result;
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) break;
    if (now_s() - start_ > timeout_s) {
      ADD_FAILURE() << "h2run did not exit within " << timeout_s << " s; killing it";
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  result.seconds = now_s() - start_;
  result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  result.out = read_text(dir_ + "/out.txt");
  result.err = read_text(dir_ + "/err.txt");
  return result;
}

RunResult run_h2run(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    double timeout_s) {
  return H2runProcess(args, env).wait(timeout_s);
}

std::string write_rank_pid(const std::string& dir) {
  return "echo $$ > " + dir + "/r$H2_RANK.tmp && mv " + dir + "/r$H2_RANK.tmp " + dir +
         "/r$H2_RANK";
}

int wait_for_pid_file(const std::string& path, double timeout_s) {
  const double start = now_s();
  while (now_s() - start < timeout_s) {
    std::ifstream in(path);
    int pid = -1;
    if (in >> pid) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');  // "pid (comm) S ...": the state follows the name
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

bool gone_within(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace h2::testing
