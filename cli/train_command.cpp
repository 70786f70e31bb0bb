// `h2 train CONFIG.yaml [--set section.key=value ...]`: training in one process, or as one rank
// of a data-parallel or pipelined job (parallel.mode: dp, pipeline) started by h2run, mpirun or
// srun, whose variables say which rank this is (comm/bootstrap/rank_env.h). Every config key, its
// type, default and meaning is listed by `h2 train --help`. A bad config is reported (exit 2)
// before any work. `--print-config` prints the effective config and exits; `--dry-run` checks the
// config, plan, data and memory (everything up to the first step) and exits. SIGINT, SIGTERM and
// SIGUSR1 stop the run after the current step with a checkpoint: exit 128 + signal.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "cli/auto_plan.h"
#include "cli/command.h"
#include "cli/job_cluster.h"
#include "comm/timeouts.h"
#include "comm/world/world.h"
#include "core/error.h"
#include "train/config/config.h"
#include "train/config/plan.h"
#include "train/stop_signals.h"
#include "train/trainer.h"

namespace h2::cli {
namespace {

// Where the run writes, relative paths resolved against the working directory.
std::string output_note(const config::TrainConfig& cfg) {
  auto where = [](const std::string& path) {
    return std::filesystem::absolute(path).lexically_normal().string();
  };
  std::vector<std::string> outputs;
  if (!cfg.checkpoint.dir.empty()) outputs.push_back("checkpoints in " + where(cfg.checkpoint.dir));
  if (!cfg.log.metrics_file.empty()) outputs.push_back("metrics " + where(cfg.log.metrics_file));
  if (!cfg.log.trace_file.empty()) outputs.push_back("trace " + where(cfg.log.trace_file));
  if (outputs.empty()) return "outputs: none (no checkpoint.dir, log.metrics_file or trace_file)";
  std::string text = "outputs: ";
  for (size_t i = 0; i < outputs.size(); ++i) text += (i ? ", " : "") + outputs[i];
  return text;
}

}  // namespace

Command make_train_command(CLI::App& parent) {
  struct Options {
    std::string config_path;
    std::vector<std::string> overrides;
    bool print_config = false;
    bool dry_run = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand("train", "Train a model from a YAML config");
  app->add_option("config", options->config_path, "YAML config (see configs/)")->required();
  add_set_option(*app, options->overrides);
  app->add_flag("--print-config", options->print_config,
                "Print the effective config (file, --set and defaults) as YAML and exit");
  app->add_flag("--dry-run", options->dry_run,
                "Check the config, plan, data and memory, build the model, then exit without "
                "training");
  app->footer("Config keys (YAML sections; any key also as --set section.key=value):\n\n" +
              config::help_table());
  return {
      app, [options] {
        config::TrainConfig cfg = config::load_config(options->config_path, options->overrides);
        if (options->print_config) {
          fmt::print("{}", config::dump_yaml(cfg));
          return 0;
        }
        const comm::RankInfo rank = comm::discover_rank(comm::process_env());
        const std::optional<Cluster> cluster = job_cluster(cfg);
        if (cfg.parallel.plan == "auto") {  // before anything reads the stages or devices
          if (!cluster)
            H2_THROW(ConfigError,
                     "parallel.plan auto ({}) plans a cluster: set cluster.file or start the job "
                     "with h2run --cluster FILE",
                     cfg.origin_of("parallel.plan"));
          config::apply_plan(auto_plan(cfg, *cluster, rank.rank, rank.size, print_line), cfg,
                             rank.size);
        } else if (!cfg.parallel.plan.empty()) {
          config::apply_plan(config::load_plan(cfg.parallel.plan), cfg, rank.size);
        }
        RuntimeOptions runtime_options = RuntimeOptions::from_env();
        std::vector<int> chips;
        if (cluster) chips = apply_cluster(*cluster, cfg, runtime_options, rank.size);
        // Ranks sharing a node share its cores: each takes its share unless told otherwise.
        if (runtime_options.cpu.threads == 0 && rank.local_size > 1)
          runtime_options.cpu.threads = std::max(1, comm::usable_cpu_count() / rank.local_size);
        auto runtime = create_runtime(runtime_options);
        if (cfg.parallel.mode == config::ParallelMode::single && rank.size > 1)
          H2_THROW(ConfigError,
                   "{}: parallel.mode is 'single' but {} started {} ranks; set parallel.mode: dp "
                   "or pipeline (or start one process)",
                   cfg.origin_of("parallel.mode"), rank.launcher, rank.size);
        // A job of one process runs in memory; a job of several joins through the store.
        std::unique_ptr<comm::World> world;
        std::unique_ptr<comm::Communicator> alone;
        if (rank.size > 1)
          world = comm::World::join(
              rank, runtime->device(config::device_for_rank(cfg, rank.rank, rank.size)),
              comm::WorldOptions{.cluster = cluster ? &*cluster : nullptr, .cluster_chips = chips});
        else
          alone = comm::loopback_communicator();
        train::StopSignals stop_signals;  // before the model is built: a stop then ends step 1
        train::Trainer trainer(cfg, *runtime, print_line, world ? world->comm() : *alone,
                               options->dry_run);
        if (options->dry_run) {
          if (rank.rank == 0) {
            print_line(trainer.describe());
            print_line(fmt::format("dry run: the config, plan, data and memory check out; {}",
                                   output_note(cfg)));
          }
          return 0;
        }
        if (rank.rank == 0) print_line(output_note(cfg));
        train::TrainSummary summary =
            trainer.run([&stop_signals] { return stop_signals.received(); });
        if (summary.stopped_by != 0) return 128 + summary.stopped_by;
        if (rank.rank != 0 || summary.steps == summary.first_step) return 0;
        fmt::print("done: {} steps, final loss {:.4f}{}, {:.0f} tok/s, peak memory {:.1f} MiB\n",
                   summary.steps, summary.final_loss,
                   summary.final_eval_loss >= 0
                       ? fmt::format(", eval loss {:.4f}", summary.final_eval_loss)
                       : "",
                   summary.tokens_per_s, double(summary.peak_mem_bytes) / (1 << 20));
        return 0;
      }};
}

}  // namespace h2::cli
