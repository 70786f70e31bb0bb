// The tail every benchmark's main() shares: parse the command line, then run, with one exit
// convention: 0 (after --help too), 2 for a flag CLI11 refuses (its message printed), 1 for an
// error while running, reported on stderr as "<program>: error: <what>".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

namespace h2::bench {

// `run` returns the exit status; `app` is named after the program (CLI::App's second argument).
template <class Run>
int parse_and_run(CLI::App& app, int argc, char** argv, Run&& run) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), e.what());
    return 1;
  }
}

}  // namespace h2::bench
