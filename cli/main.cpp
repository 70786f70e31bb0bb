// `h2`: the command-line entry point. Subcommands live in their own files (command.h lists
// them). Exit codes: 0 success, 2 bad usage or config, 1 runtime failure.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/command.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"H2: train large language models on heterogeneous clusters", "h2"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "h2 0.1.0");
  h2::cli::CommandSet commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return commands.run_parsed();
  } catch (const h2::ConfigError& e) {
    std::fprintf(stderr, "h2: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h2: error: %s\n", e.what());
    return 1;
  }
}
