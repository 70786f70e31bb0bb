// `h2 profile --cluster FILE CONFIG [--out DIR]`: measures, on one virtual chip of each chip type
// of the cluster, what the config's model costs per unit (cli/planning.h, train/unit_profiler.h)
// and caches it as one file per chip type in DIR, keyed by the chip's spec, the model shape, the
// dtype and the H2 version; matching files are reused unless --force.
#include <fmt/format.h>

#include "backends/vchip/cluster_file.h"
#include "cli/command.h"
#include "cli/planning.h"
#include "core/error.h"
#include "train/config/config.h"

namespace h2::cli {

Command make_profile_command(CLI::App& parent) {
  struct Options {
    std::string config_path, cluster_path, out = "profiles";
    std::vector<std::string> overrides;
    std::vector<int64_t> rows = {1, 2, 4, 8};
    int repeats = 5;
    bool force = false;
    bool datasheet = false;
    std::vector<double> efficiency;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "profile", "Measure each chip type's per-unit time and memory for a model (HeteroAuto)");
  app->add_option("config", options->config_path, "training config (its model and dtype)")
      ->required();
  app->add_option("--cluster", options->cluster_path, "cluster file (configs/clusters/*.yaml)")
      ->required();
  app->add_option("--out", options->out, "folder of cached profiles (default profiles)");
  app->add_option("--rows", options->rows, "micro-batch sizes to measure (default 1 2 4 8)")
      ->delimiter(',');
  app->add_option("--repeats", options->repeats, "runs per figure, median kept (default 5)")
      ->check(CLI::Range(1, 1000));
  app->add_flag("--force", options->force, "measure again even where a cached profile matches");
  add_datasheet_options(*app, options->datasheet, options->efficiency);
  add_set_option(*app, options->overrides);
  return {app, [options] {
            const config::TrainConfig cfg =
                config::load_config(options->config_path, options->overrides);
            const Cluster cluster = vchip::load_cluster(options->cluster_path);
            for (int64_t r : options->rows)
              if (r < 1) H2_THROW(ConfigError, "--rows: {} is not a positive size", r);
            ProfileRequest request{.dir = options->out, .remeasure = options->force};
            if (options->datasheet) use_datasheet(request, options->efficiency, "--efficiency");
            request.options.rows = options->rows;
            request.options.repeats = options->repeats;
            request.options.seed = uint64_t(cfg.train.seed);
            request.options.progress = print_line;
            request.print = request.options.progress;
            (void)cluster_profiles(cluster, cfg, request);
            return 0;
          }};
}

}  // namespace h2::cli
