// h2_bench_sim: how fast the cluster simulator replays one training step at scale. Builds the
// step of a synthetic plan on a cluster file (1F1B over P stages, R replicas, one chip per
// stage, chips assigned in cluster order: replica r's stage q on chip r * P + q), with fixed
// per-stage durations and transfer sizes, then simulates it; prints the task count and the
// build and simulation wall times (median of --repeats). Not a timed test: a measurement for
// the scale study (issue 15).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/vchip/cluster_file.h"
#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/sim/step_graph.h"

namespace h2::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int run(int argc, char** argv) {
  CLI::App app{"h2_bench_sim: the cluster simulator's speed on one synthetic step"};
  std::string cluster_path = "configs/clusters/scale-1024.yaml";
  int stages = 8, microbatches = 32, repeats = 3;
  double activation_mb = 64, gradient_gb = 1;
  app.add_option("--cluster", cluster_path, "cluster file")->capture_default_str();
  app.add_option("--stages", stages, "pipeline stages P (replicas: chips / P)")
      ->capture_default_str();
  app.add_option("--microbatches", microbatches, "micro-batches per step")->capture_default_str();
  app.add_option("--activation-mb", activation_mb, "MB per activation or gradient transfer")
      ->capture_default_str();
  app.add_option("--gradient-gb", gradient_gb, "GB each chip all-reduces over the replicas")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "runs; the median is printed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const Cluster cluster = vchip::load_cluster(cluster_path);
  const int replicas = cluster.size() / stages;
  H2_CHECK(replicas >= 1, "{} stages on {} chips", stages, cluster.size());
  const parallel::pipeline::Schedule lowered =
      parallel::pipeline::lower(parallel::pipeline::one_f_one_b(stages, microbatches));
  parallel::pipeline::Durations d(stages);
  d.set(parallel::pipeline::ActionKind::F, 0.010).set(parallel::pipeline::ActionKind::B, 0.020);
  parallel::sim::StepSpec spec{.schedule = &lowered, .durations = &d, .rows = 1};
  for (int r = 0; r < replicas; ++r) {
    spec.replicas.emplace_back();
    for (int q = 0; q < stages; ++q) spec.replicas.back().push_back({r * stages + q});
  }
  spec.bytes = [&](int, parallel::pipeline::ActionKind) { return activation_mb * 1e6; };
  spec.replica_bytes = [&](int) { return gradient_gb * 1e9; };
  spec.optimizer_s = [](int) { return 0.005; };
  const parallel::sim::Topology topology(cluster);

  std::vector<double> build_s, simulate_s;
  size_t tasks = 0;
  double makespan = 0;
  for (int i = 0; i < repeats; ++i) {
    auto start = Clock::now();
    const parallel::sim::StepGraph step = parallel::sim::step_graph(spec, topology);
    build_s.push_back(seconds_since(start));
    start = Clock::now();
    makespan = parallel::sim::simulate(step.graph, topology).makespan;
    simulate_s.push_back(seconds_since(start));
    tasks = step.graph.tasks().size();
  }
  std::sort(build_s.begin(), build_s.end());
  std::sort(simulate_s.begin(), simulate_s.end());
  fmt::print(
      "{}: {} chips, {} stages x {} replicas, 1F1B with {} micro-batches: {} tasks; build {:.3f} "
      "s, simulate {:.3f} s (medians of {}); simulated step {:.4f} s\n",
      cluster.name, cluster.size(), stages, replicas, microbatches, tasks,
      build_s[build_s.size() / 2], simulate_s[simulate_s.size() / 2], repeats, makespan);
  return 0;
}

}  // namespace
}  // namespace h2::bench

int main(int argc, char** argv) {
  try {
    return h2::bench::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "h2_bench_sim: {}\n", e.what());
    return 1;
  }
}
