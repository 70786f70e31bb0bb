// `h2 simulate --cluster FILE --plan PLAN CONFIG`: one training step of a plan replayed on a
// cluster of any size by the cluster simulator (parallel/sim/plan_step.h): computes from the
// chips' profiles (measured, or derived from data sheets with --datasheet), transfers and
// collectives as flows sharing the cluster's links. Prints the step time and tokens/s beside the
// cost model's, and per schedule position where its ranks' time went (compute, staging, exposed
// communication, idle) and their peak memory against the chip's; writes a Chrome trace of
// sampled ranks (--trace) and a JSON report (--json).
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/plan_output.h"
#include "cli/planning.h"
#include "core/error.h"
#include "parallel/pipeline/trace_events.h"
#include "parallel/sim/plan_step.h"

namespace h2::cli {

namespace {

namespace sim = parallel::sim;
using parallel::Plan;

// The ranks a trace shows by default: each position's first rank in the first and the last
// replica.
std::vector<int> sampled_ranks(const Plan& plan) {
  std::vector<int> ranks;
  for (int r : {0, plan.replicas - 1})
    for (int q = 0; q < plan.positions(); ++q) ranks.push_back(plan.rank_at({r, q, 0}));
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<int> parse_ranks(const std::string& text, const Plan& plan) {
  if (text.empty()) return sampled_ranks(plan);
  std::vector<int> ranks;
  if (text == "all") {
    for (int r = 0; r < plan.world_size(); ++r) ranks.push_back(r);
    return ranks;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    int rank = -1;
    if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos &&
        item.size() < 10)
      rank = std::stoi(item);
    if (rank < 0 || rank >= plan.world_size())
      H2_THROW(ConfigError, "--trace-ranks: '{}' is not a rank of this plan's {} (0-{})", item,
               plan.world_size(), plan.world_size() - 1);
    ranks.push_back(rank);
    at = comma + 1;
  }
  return ranks;
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;
}

// "12.3 of 16.0 MiB" (GiB from 10 GiB of capacity up).
std::string memory_of(int64_t peak, int64_t capacity) {
  const bool gib = capacity >= (int64_t(10) << 30);
  const double unit = gib ? double(1 << 30) : double(1 << 20);
  return fmt::format("{:.1f} of {:.1f} {}", double(peak) / unit, double(capacity) / unit,
                     gib ? "GiB" : "MiB");
}

struct PositionSummary {
  std::string chip;
  int ranks = 0;
  double compute = 0, staging = 0, exposed = 0, idle = 0, worst_exposed = 0;
};

std::vector<PositionSummary> summarize(const sim::PlanSimulation& s, const Plan& plan,
                                       const Cluster& cluster) {
  std::vector<PositionSummary> out(size_t(plan.positions()));
  for (const sim::RankTime& r : s.ranks) {
    PositionSummary& p = out[size_t(r.position)];
    p.chip = cluster.chip_of(r.chip).name;
    ++p.ranks;
    p.compute += r.compute_s, p.staging += r.staging_s, p.exposed += r.exposed_s;
    p.idle += r.idle_s;
    p.worst_exposed = std::max(p.worst_exposed, r.exposed_s);
  }
  for (PositionSummary& p : out)
    for (double* v : {&p.compute, &p.staging, &p.exposed, &p.idle}) *v /= double(p.ranks);
  return out;
}

}  // namespace

Command make_simulate_command(CLI::App& parent) {
  struct Options {
    PlanningSources sources;
    std::string plan_path, trace, json;
    std::string trace_ranks;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app =
      parent.add_subcommand("simulate",
                            "One training step of a plan simulated on a cluster of any size: time, "
                            "bubble, exposed communication, memory per rank, trace");
  add_planning_options(*app, options->sources);
  app->add_option("--plan", options->plan_path, "plan file (h2 plan --out writes one)")->required();
  app->add_option("--trace", options->trace,
                  "write the simulated step as a Chrome trace (Perfetto, chrome://tracing)");
  app->add_option("--trace-ranks", options->trace_ranks,
                  "ranks in the trace: a list (0,5,9) or 'all' (default: each position's first "
                  "rank in the first and last replica)");
  app->add_option("--json", options->json, "write the figures, per position and rank, as JSON");
  app->footer(
      "The simulator replays the plan's lowered schedule on every rank with the cost model's "
      "computes and moves every transfer and collective as a flow over the cluster's links, "
      "sharing bandwidth between concurrent flows (parallel/sim/plan_step.h).");
  return {
      app, [options] {
        const PlanningJob job = load_planning_job(options->sources);
        const config::TrainConfig& cfg = job.config;
        const Cluster& cluster = job.cluster;
        const parallel::planner::CostInputs inputs = job.inputs();
        const parallel::planner::Candidate given =
            evaluate_plan_file(options->plan_path, cfg, cluster, inputs);
        const Plan& plan = given.plan;
        const std::vector<int> traced = parse_ranks(options->trace_ranks, plan);

        const auto started = std::chrono::steady_clock::now();
        const sim::PlanSimulation s = sim::simulate_plan(plan, inputs);
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        size_t transfers = 0;
        for (const sim::Task& t : s.step.graph.tasks())
          transfers += t.kind == sim::Task::Kind::transfer ? 1 : 0;
        const double tokens =
            double(plan.global_micro_batches() * plan.micro_batch_rows * inputs.model.seq_len);
        print_line(fmt::format("{}: {}", options->plan_path, plan.str()));
        print_line(fmt::format(
            "simulated step {:.2f} ms, {:.0f} tokens/s (cost model {:.2f} ms, {:+.1f}%)",
            1e3 * s.step_s, tokens / s.step_s, 1e3 * given.estimate.step_s,
            100 * (given.estimate.step_s / s.step_s - 1)));
        print_line(fmt::format(
            "{} ranks on {} chips, {} tasks ({} transfers) simulated in {:.2f} s, peak RSS "
            "{:.0f} MiB",
            plan.world_size(), cluster.size(), s.step.graph.tasks().size(), transfers, wall,
            peak_rss_mib()));
        print_line(
            "per rank of each position, mean (ms): compute, host staging, exposed "
            "communication, idle; peak memory against the chip's");
        print_line(fmt::format("{:>8}  {:<14} {:>6} {:>10} {:>10} {:>10} {:>10}  {}", "position",
                               "chip", "ranks", "compute", "staging", "exposed", "idle", "memory"));
        const std::vector<PositionSummary> summary = summarize(s, plan, cluster);
        for (size_t q = 0; q < summary.size(); ++q) {
          const PositionSummary& p = summary[q];
          print_line(fmt::format("{:>8}  {:<14} {:>6} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f}  {}",
                                 q, p.chip, p.ranks, 1e3 * p.compute, 1e3 * p.staging,
                                 1e3 * p.exposed, 1e3 * p.idle,
                                 memory_of(s.peak_bytes[q], s.capacity_bytes[q])));
        }
        if (!options->trace.empty()) {
          parallel::pipeline::write_trace_file(options->trace,
                                               sim::simulation_trace_json(s, traced));
          print_line(fmt::format("trace of {} ranks written to {}", traced.size(), options->trace));
        }
        if (!options->json.empty()) {
          nlohmann::json report{{"plan", options->plan_path},
                                {"step_s", s.step_s},
                                {"tokens_per_s", tokens / s.step_s},
                                {"cost_model_step_s", given.estimate.step_s},
                                {"ranks", plan.world_size()},
                                {"tasks", s.step.graph.tasks().size()},
                                {"transfers", transfers},
                                {"wall_s", wall},
                                {"peak_rss_mib", peak_rss_mib()}};
          for (size_t q = 0; q < summary.size(); ++q) {
            const PositionSummary& p = summary[q];
            report["positions"].push_back({{"chip", p.chip},
                                           {"ranks", p.ranks},
                                           {"compute_s", p.compute},
                                           {"staging_s", p.staging},
                                           {"exposed_s", p.exposed},
                                           {"worst_exposed_s", p.worst_exposed},
                                           {"idle_s", p.idle},
                                           {"peak_bytes", s.peak_bytes[q]},
                                           {"capacity_bytes", s.capacity_bytes[q]}});
          }
          write_text_file(options->json, report.dump(1) + "\n");
        }
        return 0;
      }};
}

}  // namespace h2::cli
