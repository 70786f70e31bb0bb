// A subcommand of `h2`: its CLI11 sub-app (options bound to state the action captures) and the
// action that runs when the user selects it. CommandSet registers the full list, in one place.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace h2::cli {

// A progress or result line on stdout, flushed at once (long commands report as they go, and a
// launcher that collects ranks' output sees each line when it is written).
inline void print_line(const std::string& line) {
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

// A CLI11 check for a floating-point option: a finite number at least `min`. CLI11's own
// NonNegativeNumber and Range let NaN through (every comparison with it is false).
inline CLI::Validator finite_at_least(double min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || value < min)
          return fmt::format("'{}' is not a finite number >= {}", text, min);
        return "";
      },
      fmt::format("FINITE >= {}", min));
}

// The repeatable "--set section.key=value" of the commands that read a training config. One
// value per --set, so that "--set k=v config.yaml" leaves the config to its positional (CLI11
// lets a vector option take every following word).
inline CLI::Option* add_set_option(CLI::App& app, std::vector<std::string>& overrides) {
  return app
      .add_option("--set", overrides, "Override a config key: section.key=value (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// A check for each comma-separated element of --ids: CLI11 reads "--ids ''" as the id 0, which
// would silently become a prompt of token 0.
inline CLI::Validator non_empty_ids() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.find_first_not_of(" \t") == std::string::npos)
          return "an empty token id (give ids like 72,105)";
        return "";
      },
      "ID");
}

struct Command {
  CLI::App* app;
  std::function<int()> run;  // returns the exit code
};

// Each is defined in the file of the same name.
Command make_devices_command(CLI::App& parent);     // info_commands.cpp
Command make_ops_command(CLI::App& parent);         // info_commands.cpp
Command make_env_command(CLI::App& parent);         // info_commands.cpp
Command make_demo_command(CLI::App& parent);        // demo.cpp
Command make_train_command(CLI::App& parent);       // train_command.cpp
Command make_generate_command(CLI::App& parent);    // generate_command.cpp
Command make_export_command(CLI::App& parent);      // export_command.cpp
Command make_import_command(CLI::App& parent);      // import_command.cpp
Command make_logits_command(CLI::App& parent);      // logits_command.cpp
Command make_comm_bench_command(CLI::App& parent);  // comm_bench/comm_bench_command.cpp
Command make_profile_command(CLI::App& parent);     // profile_command.cpp
Command make_plan_command(CLI::App& parent);        // plan_command.cpp
Command make_simulate_command(CLI::App& parent);    // simulate_command.cpp

class CommandSet {
 public:
  explicit CommandSet(CLI::App& app)
      : commands_{
            make_train_command(app),      make_generate_command(app), make_export_command(app),
            make_import_command(app),     make_logits_command(app),   make_profile_command(app),
            make_plan_command(app),       make_simulate_command(app), make_demo_command(app),
            make_comm_bench_command(app), make_devices_command(app),  make_ops_command(app),
            make_env_command(app)} {}
  // Runs the subcommand that was parsed; 2 when none was.
  int run_parsed() const {
    for (const Command& command : commands_)
      if (command.app->parsed()) return command.run();
    return 2;
  }

 private:
  std::vector<Command> commands_;
};

}  // namespace h2::cli
