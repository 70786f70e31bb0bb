// `h2 train CONFIG.yaml [--set section.key=value ...]`: single-process training. Every config
// key, its type, default and meaning is listed by `h2 train --help`. A bad config is reported
// (exit 2) before any work starts.
#include <fmt/format.h>

#include "backends/registry.h"
#include "launcher/command.h"
#include "train/config/config.h"
#include "train/trainer.h"

namespace h2::launcher {

Command make_train_command(CLI::App& parent) {
  struct Options {
    std::string config_path;
    std::vector<std::string> overrides;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand("train", "Train a model from a YAML config");
  app->add_option("config", options->config_path, "YAML config (see configs/)")->required();
  app->add_option("--set", options->overrides, "Override a key: section.key=value (repeatable)");
  app->footer("Config keys (YAML sections; any key also as --set section.key=value):\n\n" +
              config::help_table());
  return {app, [options] {
            config::TrainConfig cfg = config::load_config(options->config_path, options->overrides);
            auto runtime = create_runtime();
            train::Trainer trainer(cfg, *runtime, [](const std::string& line) {
              fmt::print("{}\n", line);
              std::fflush(stdout);
            });
            train::TrainSummary summary = trainer.run();
            fmt::print(
                "done: {} steps, final loss {:.4f}{}, {:.0f} tok/s, peak memory {:.1f} MiB\n",
                summary.steps, summary.final_loss,
                summary.final_eval_loss >= 0
                    ? fmt::format(", eval loss {:.4f}", summary.final_eval_loss)
                    : "",
                summary.tokens_per_s, double(summary.peak_mem_bytes) / (1 << 20));
            return 0;
          }};
}

}  // namespace h2::launcher
