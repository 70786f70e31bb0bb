// `h2run`: H2's own launcher. Parses the flags, resolves the command and the job token, then hands
// the job to the supervisor. Exit codes: 0 when every rank succeeded, 2 for bad usage, the failing
// rank's code (128 + signal when it was killed), 1 when h2run itself fails.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "core/version.h"
#include "h2run/job_setup.h"
#include "h2run/options.h"
#include "h2run/signal_fd.h"
#include "h2run/supervisor.h"

extern char** environ;

namespace {

std::optional<std::string> getenv_opt(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace h2::h2run;
  CLI::App app{"", "h2run"};
  JobSetup job;
  add_run_flags(app, job.options);
  app.set_version_flag("--version", h2::version_text("h2run"));
  std::vector<std::string> command;
  std::vector<std::string> flags = split_command(argc, argv, command);
  std::reverse(flags.begin(), flags.end());  // CLI11 takes the arguments last first
  try {
    app.parse(flags);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    finish_run_options(job.options, std::move(command), app.remaining());
    job.executable = find_executable(job.options.command.front(), getenv_opt("PATH"));
    job.token = job_token(job.options, getenv_opt("H2_JOB_TOKEN"));
    for (char** entry = environ; *entry != nullptr; ++entry) job.base_env.emplace_back(*entry);
    SignalFd signals;  // before the store's thread starts, so that it inherits the mask
    return run_job(job, signals);
  } catch (const h2::ConfigError& e) {
    std::fprintf(stderr, "h2run: error: %s\n", h2::user_message(e, h2::debug_requested()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h2run: error: %s\n", h2::user_message(e, h2::debug_requested()).c_str());
    return 1;
  }
}
