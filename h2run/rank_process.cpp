// RankProcess: fork and exec with the child's set-up done between them (only async-signal-safe
// calls there: the parent runs the store server's thread), exec failures reported back through a
// close-on-exec pipe, reaping and group signals.
#include "h2run/rank_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/error.h"

namespace h2::h2run {
namespace {

// What the child writes to the error pipe when a set-up step or exec fails.
struct ChildFailure {
  int step;  // index into kSteps
  int error;
};
constexpr const char* kSteps[] = {"setpgid", "prctl(PR_SET_PDEATHSIG)", "sigprocmask", "dup2",
                                  "execve"};

[[noreturn]] void child_fail(int error_fd, int step) {
  const ChildFailure failure{step, errno};
  ssize_t ignored = ::write(error_fd, &failure, sizeof(failure));
  (void)ignored;
  ::_exit(127);
}

// Runs in the child between fork and exec.
[[noreturn]] void exec_child(pid_t parent, char* const* argv, char* const* envp,
                             const char* executable, const sigset_t& mask, int in_fd, int out_fd,
                             int err_fd, int error_fd, int open_max) {
  if (::setpgid(0, 0) != 0) child_fail(error_fd, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(error_fd, 1);
  if (::getppid() != parent) ::_exit(127);  // h2run died before the line above
  if (::sigprocmask(SIG_SETMASK, &mask, nullptr) != 0) child_fail(error_fd, 2);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0)
    child_fail(error_fd, 3);
  // Nothing else of h2run's (the store's sockets, other ranks' pipes) survives the exec. Kernels
  // before 5.11 refuse CLOSE_RANGE_CLOEXEC (before 5.9 close_range itself): flag each one.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    for (int fd = 3; fd < open_max; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  ::execve(executable, argv, envp);
  child_fail(error_fd, 4);
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

RankProcess::RankProcess(const RankSpec& spec, const sigset_t& child_mask) : rank_(spec.rank) {
  const std::string label = fmt::format("rank {}", spec.rank);
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid())
    H2_THROW(Error, "cannot open /dev/null for {}'s stdin: {}", label, std::strerror(errno));
  Pipe out = make_pipe(label + " stdout", true);
  Pipe err = make_pipe(label + " stderr", true);
  Pipe error = make_pipe(label + " exec report", false);
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  const pid_t parent = ::getpid();
  const long open_max = ::sysconf(_SC_OPEN_MAX);  // sysconf is not safe after fork: asked here

  pid_ = ::fork();
  if (pid_ < 0) H2_THROW(Error, "cannot fork {}: {}", label, std::strerror(errno));
  if (pid_ == 0)
    exec_child(parent, argv.data(), envp.data(), spec.executable.c_str(), child_mask,
               dev_null.get(), out.write.get(), err.write.get(), error.write.get(),
               open_max > 0 ? int(std::min<long>(open_max, 1 << 20)) : 1024);

  // Also from here, so that signals sent right away reach the group (EACCES: it exec'd already).
  if (::setpgid(pid_, pid_) != 0 && errno != EACCES && errno != ESRCH)
    fmt::print(stderr, "h2run: setpgid({}) for {}: {}\n", pid_, label, std::strerror(errno));
  out.write.reset();
  err.write.reset();
  error.write.reset();
  ChildFailure failure{};
  ssize_t n;
  do n = ::read(error.read.get(), &failure, sizeof(failure));
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    int ignored;
    while (::waitpid(pid_, &ignored, 0) < 0 && errno == EINTR) {
    }
    status_ = ExitStatus{false, 127};
    const bool known = failure.step >= 0 && failure.step < int(std::size(kSteps));
    H2_THROW(Error, "cannot start {} ({}): {} failed: {}", label, spec.executable,
             known ? kSteps[failure.step] : "set-up", std::strerror(failure.error));
  }
  const std::string prefix = fmt::format("[rank {}] ", spec.rank);
  pipes_.reserve(2);
  pipes_.emplace_back(std::move(out.read), 1, prefix, tail_);
  pipes_.emplace_back(std::move(err.read), 2, prefix, tail_);
}

RankProcess::~RankProcess() {
  if (pid_ <= 0 || status_) return;  // reaped: try_reap stopped its group
  ::kill(-pid_, SIGKILL);
  int wait_status;
  while (::waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
  }
}

void RankProcess::add_poll_fds(std::vector<pollfd>& fds) const {
  for (const OutputPipe& pipe : pipes_)
    if (pipe.open()) fds.push_back({pipe.fd(), POLLIN, 0});
}

void RankProcess::pump() {
  for (OutputPipe& pipe : pipes_) pipe.pump();
}

bool RankProcess::try_reap() {
  if (status_) return false;
  // Ended? Asked without reaping: while the rank is a zombie its pid, and so its process
  // group's number, cannot be reused, so the SIGKILL for what it left running in its group
  // reaches them and nothing else (sent after the reap, it could reach a new group that took
  // the number).
  siginfo_t info{};
  int asked;
  do asked = ::waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  while (asked < 0 && errno == EINTR);
  if (asked < 0)
    H2_THROW(Error, "waitid({}) for rank {} failed: {}", pid_, rank_, std::strerror(errno));
  if (info.si_pid == 0) return false;
  ::kill(-pid_, SIGKILL);  // the rank's own children, if any (ESRCH: none)
  int wait_status = 0;
  pid_t got;
  do got = ::waitpid(pid_, &wait_status, 0);
  while (got < 0 && errno == EINTR);
  if (got < 0)
    H2_THROW(Error, "waitpid({}) for rank {} failed: {}", pid_, rank_, std::strerror(errno));
  status_ = ExitStatus::from_wait(wait_status);
  for (OutputPipe& pipe : pipes_) pipe.finish();
  return true;
}

void RankProcess::signal(int signal) const {
  if (::kill(-pid_, signal) != 0 && errno != ESRCH)
    fmt::print(stderr, "h2run: cannot send {} to rank {} (process group {}): {}\n",
               signal_words(signal), rank_, pid_, std::strerror(errno));
}

}  // namespace h2::h2run
