// Printing and saving plans (see plan_output.h).
#include "cli/plan_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/checkpoint/durable_io.h"
#include "train/config/plan.h"

namespace h2::cli {
namespace {

namespace planner = parallel::planner;

double mib(double bytes) {
  return bytes / double(1 << 20);
}

// "chip-a x2: blocks 0-2 (3), busy 70.1 ms, 60.1 of 2048 MiB"
std::string groups_line(const planner::Candidate& c) {
  const parallel::Plan& plan = c.plan;
  std::vector<std::string> parts;
  for (int q = 0; q < plan.positions(); ++q) {
    int blocks = 0;
    for (int s = q; s < plan.stages(); s += plan.positions()) {
      const int b = plan.layout.end(s) - plan.layout.begin(s);
      blocks += b - (s == 0) - (s == plan.stages() - 1);
    }
    const planner::PositionEstimate& p = c.estimate.positions[size_t(q)];
    parts.push_back(fmt::format("{} x{}: {} block{}, busy {:.1f} ms, {:.1f} of {:.0f} MiB", p.chip,
                                p.ranks, blocks, blocks == 1 ? "" : "s", 1e3 * p.busy_s,
                                mib(double(p.peak_bytes)), mib(double(p.capacity_bytes))));
  }
  return fmt::format("{}", fmt::join(parts, " | "));
}

}  // namespace

void print_search(const planner::SearchResult& result, const Cluster& cluster,
                  const planner::CostInputs& inputs, const planner::SearchSpace& space, int top,
                  bool explain, const Print& print) {
  std::vector<std::string> chips;
  for (const std::string& type : cluster.chip_types())
    chips.push_back(fmt::format("{} {}", cluster.count_of(type), type));
  print(fmt::format(
      "h2 plan: {} ({} chips: {}), {} parameters in {} blocks, {} sequences of {} "
      "tokens per step, {}",
      cluster.name, cluster.size(), fmt::join(chips, ", "), inputs.model.parameters(),
      inputs.model.n_layers, space.global_rows, inputs.model.seq_len, dtype_name(inputs.dtype)));
  print(fmt::format(
      "searched {} of {} classes (chips, replicas, groups, micro-batch size): {} configurations, "
      "costed {} plans in {:.2f} s; {} ruled out by memory; {}",
      result.classes_expanded, result.classes, result.outer_candidates, result.costed,
      result.seconds, result.memory_pruned,
      result.complete ? std::string("complete: the rest are bounded out")
      : result.best.empty()
          ? std::string("stopped by the budget (--max-classes) before any plan fitted")
          : fmt::format("stopped by the budget (--max-classes): the best is within {:.1f}% of "
                        "the optimum",
                        100 * result.optimality_gap)));
  for (size_t i = 0; i < result.best.size() && int(i) < top; ++i) {
    const planner::Candidate& c = result.best[i];
    print_candidate(c, fmt::format("#{:<2}", i + 1), print);
    if (explain && i > 0)
      print("      lost to #1: " + planner::explain(result.best.front(), c, inputs));
  }
  if (explain)
    for (const planner::Candidate& c : result.too_large)
      print(fmt::format("ruled out by memory: {} ({}; {:.2f} ms/step if it fitted)", c.plan.str(),
                        c.estimate.memory_problem(), 1e3 * c.estimate.step_s));
}

void print_candidate(const planner::Candidate& c, const std::string& name, const Print& print) {
  print(fmt::format("{} {:8.2f} ms/step {:9.0f} tok/s  bubble {:4.1f}%  comm {:5.1f} ms  {}", name,
                    1e3 * c.estimate.step_s, c.tokens_per_s, 100 * c.estimate.bubble,
                    1e3 * c.estimate.comm_s, c.plan.str()));
  print("      " + groups_line(c));
  if (!c.estimate.fits())
    print("      does not fit: " + c.estimate.memory_problem() +
          " (recompute, more chips per group or smaller micro-batches need less)");
}

config::PlanPrediction prediction_of(const planner::Candidate& c,
                                     const planner::CostInputs& inputs) {
  config::PlanPrediction p{.step_ms = 1e3 * c.estimate.step_s, .tokens_per_s = c.tokens_per_s};
  for (const planner::PositionEstimate& q : c.estimate.positions) {
    p.peak_mib.push_back(mib(double(q.peak_bytes)));
    p.busy_ms.push_back(1e3 * q.busy_s);
  }
  (void)inputs;
  return p;
}

std::string plan_text(const std::string& path, const planner::Candidate& c, const Cluster& cluster,
                      const planner::CostInputs& inputs, const config::TrainConfig& config,
                      const std::string& what) {
  std::vector<std::string> chips;
  for (const planner::PositionEstimate& q : c.estimate.positions) chips.push_back(q.chip);
  const std::string header = fmt::format(
      "Written by h2 plan for {} on cluster {} ({}): {}, predicted {:.2f} ms per step.\nRun it: "
      "h2run -n {} --cluster {} -- h2 train CONFIG --set parallel.plan={}",
      config.origin_of("model.dim"), cluster.name, cluster.source, what, 1e3 * c.estimate.step_s,
      c.plan.world_size(), cluster.source, path);
  return config::plan_file_text(c.plan, chips, prediction_of(c, inputs), header);
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  checkpoint::write_file_durably(
      path, [&](checkpoint::ByteSink& sink) { sink(text.data(), text.size()); });
}

}  // namespace h2::cli
