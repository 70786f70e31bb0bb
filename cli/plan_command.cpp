// `h2 plan --cluster FILE CONFIG [--top K] [--explain] [--out PLAN.yaml]`: HeteroAuto. Profiles
// the cluster's chip types (cached), searches the plans of the config's model and global batch on
// the cluster (parallel/planner/search.h), prints the best K with their predicted step time,
// tokens/s, memory per rank against its chip, bubble and communication, says with --explain why
// each runner-up lost, and writes the best as a plan file that parallel.plan reads.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/plan_output.h"
#include "cli/planning.h"
#include "core/dtype.h"
#include "core/error.h"
#include "train/config/plan.h"

namespace h2::cli {

Command make_plan_command(CLI::App& parent) {
  struct Options {
    PlanningSources sources;
    std::string out, evaluate, write_top;
    int top = 5;
    bool explain = false;
    int64_t max_classes = kDefaultMaxClasses;
    bool no_fsdp = false;
    std::vector<std::string> wires = {"compute", "bf16"};
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "plan", "HeteroAuto: the best plans of a config on a cluster, predicted time and memory");
  add_planning_options(*app, options->sources);
  app->add_option("--top", options->top, "plans to print (default 5)")->check(CLI::Range(1, 1000));
  app->add_flag("--explain", options->explain, "say why each runner-up lost to the best");
  app->add_option("--max-classes", options->max_classes,
                  "expand at most this many classes of plans, most promising first (0: all; "
                  "default 48); a search stopped early says how far from the optimum it can be")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  app->add_option("--out", options->out, "write the best plan here (parallel.plan reads it)");
  app->add_option("--evaluate", options->evaluate,
                  "predict this plan file instead of searching (with --out: it, with the "
                  "prediction)");
  app->add_option("--write-top", options->write_top,
                  "write each of the top K plans to this folder (plan-001.yaml, ...)");
  app->add_option("--wires", options->wires,
                  "dtypes activations may cross links in: compute (the training dtype), bf16, "
                  "f8e4m3 (default compute,bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"compute", "bf16", "f8e4m3"}));
  app->add_flag("--no-fsdp", options->no_fsdp,
                "replicate parameters in every group instead of trying FSDP (ZeroPP) in it");
  app->footer(
      "The config's global batch (train.batch_size x train.grad_accum x parallel.replicas "
      "sequences per step) stays fixed; the search chooses the chips' order and groups, the "
      "layer split, replicas, micro-batching, schedule, FSDP, recompute and the wire dtype.");
  return {
      app, [options] {
        const PlanningJob job = load_planning_job(options->sources);
        const config::TrainConfig& cfg = job.config;
        const Cluster& cluster = job.cluster;
        const parallel::planner::CostInputs inputs = job.inputs();
        if (!options->evaluate.empty()) {
          const parallel::planner::Candidate given =
              evaluate_plan_file(options->evaluate, cfg, cluster, inputs);
          print_candidate(given, options->evaluate, print_line);
          if (!options->out.empty())
            write_text_file(options->out,
                            plan_text(options->out, given, cluster, inputs, cfg,
                                      fmt::format("the plan of {}", options->evaluate)));
          return 0;
        }
        parallel::planner::SearchSpace space = search_space(cfg);
        space.max_classes = options->max_classes;
        space.fsdp = !options->no_fsdp;
        space.wires.clear();
        for (const std::string& wire : options->wires)
          space.wires.push_back(wire == "compute" ? std::optional<DType>{}
                                                  : std::optional<DType>{parse_dtype(wire)});
        space.keep = std::max(options->top, 10);
        const parallel::planner::SearchResult result =
            parallel::planner::search(cluster, inputs, space);
        print_search(result, cluster, inputs, space, options->top, options->explain, print_line);
        if (result.best.empty())
          H2_THROW(ConfigError,
                   "{}: no plan of {} fits the cluster's memory even with recomputation; "
                   "use chips with more memory, a smaller model or a smaller batch",
                   cluster.source, options->sources.config_path);
        if (!options->out.empty()) {
          write_text_file(options->out, plan_text(options->out, result.best.front(), cluster,
                                                  inputs, cfg, "the best of the search"));
          print_line(fmt::format("plan written to {} (h2 train ... --set parallel.plan={})",
                                 options->out, options->out));
        }
        if (!options->write_top.empty())
          for (size_t i = 0; i < result.best.size() && int(i) < options->top; ++i) {
            const std::string path = fmt::format("{}/plan-{:03}.yaml", options->write_top, i + 1);
            write_text_file(path, plan_text(path, result.best[i], cluster, inputs, cfg,
                                            fmt::format("number {} of the search", i + 1)));
          }
        return 0;
      }};
}

}  // namespace h2::cli
