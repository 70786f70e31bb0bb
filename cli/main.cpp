// `h2`: the command-line entry point. Subcommands live in their own files (command.h lists
// them). Exit codes: 0 success, 2 bad usage or config, 1 runtime failure. Errors name what was
// wrong in the user's terms; the source line that raised them is shown at H2_LOG_LEVEL=debug.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "core/version.h"

namespace {

// The first argument when it names no subcommand (and is not an option): "h2 bogus" is then
// refused naming it, instead of CLI11's "a subcommand is required".
int refuse_unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return 0;
  const std::string name = argv[1];
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(name)) return 0;
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  std::fprintf(stderr, "h2: error: unknown command '%s'; the commands are %s (h2 --help)\n",
               name.c_str(), names.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"H2: train large language models on heterogeneous clusters", "h2"};
  app.require_subcommand(1);
  app.set_version_flag("--version", h2::version_text("h2"));
  h2::cli::CommandSet commands(app);
  if (int code = refuse_unknown_command(app, argc, argv); code != 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return commands.run_parsed();
  } catch (const h2::ConfigError& e) {
    std::fprintf(stderr, "h2: error: %s\n", h2::user_message(e, h2::debug_requested()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h2: error: %s\n", h2::user_message(e, h2::debug_requested()).c_str());
    return 1;
  }
}
