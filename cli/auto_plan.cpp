// parallel.plan: auto (see auto_plan.h).
#include "cli/auto_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli/plan_output.h"
#include "cli/planning.h"
#include "comm/timeouts.h"
#include "core/error.h"

namespace h2::cli {
namespace {

namespace planner = parallel::planner;

// Waits until rank 0 has written every profile, up to the communication timeout.
void wait_for_profiles(const Cluster& cluster, const config::TrainConfig& config) {
  const auto give_up = std::chrono::steady_clock::now() + comm::comm_timeout();
  for (;;) {
    const std::vector<std::string> missing =
        missing_profiles(cluster, config, config.parallel.profiles);
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() > give_up)
      H2_THROW(ConfigError,
               "parallel.plan auto: rank 0 did not write the profiles of {} to {} in time (is "
               "the folder shared by the ranks?); run h2 profile --cluster {} first",
               fmt::join(missing, ", "), config.parallel.profiles, cluster.source);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

config::Plan auto_plan(const config::TrainConfig& config, const Cluster& cluster, int rank,
                       int world_size, const std::function<void(const std::string&)>& print) {
  const std::string origin = config.origin_of("parallel.plan");
  if (cluster.size() != world_size)
    H2_THROW(ConfigError,
             "parallel.plan auto ({}) plans {}, whose {} chips must be the job's ranks; the job "
             "has {} (h2run -n {} --cluster {})",
             origin, cluster.source, cluster.size(), world_size, cluster.size(), cluster.source);
  auto say = [&](const std::string& line) {
    if (rank == 0) print(line);
  };
  ProfileRequest request{.dir = config.parallel.profiles, .print = say};
  request.options.seed = uint64_t(config.train.seed);
  if (rank != 0) {
    wait_for_profiles(cluster, config);
    request.measure_missing = false;
  }
  const planner::Profiles profiles = cluster_profiles(cluster, config, request);
  const planner::CostInputs inputs{.cluster = &cluster,
                                   .model = model_shape(config),
                                   .dtype = config.train.dtype,
                                   .profiles = &profiles};
  planner::SearchSpace space = search_space(config);
  const planner::SearchResult result = planner::search(cluster, inputs, space);
  if (result.best.empty())
    H2_THROW(ConfigError,
             "parallel.plan auto ({}): no plan of this model fits {} even with recomputation "
             "({} configurations ruled out by memory); use chips with more memory, a smaller "
             "model ({}) or a smaller batch ({})",
             origin, cluster.source, result.memory_pruned, config.origin_of("model.dim"),
             config.origin_of("train.batch_size"));
  if (rank == 0) print_search(result, cluster, inputs, space, 3, true, print);
  const planner::Candidate& best = result.best.front();
  const std::string name = fmt::format("parallel.plan auto (the best of {} plans)", result.costed);
  const std::string path =
      (std::filesystem::path(config.checkpoint.dir.empty() ? "." : config.checkpoint.dir) /
       "plan.yaml")
          .string();
  const std::string text = plan_text(path, best, cluster, inputs, config,
                                     fmt::format("chosen by parallel.plan auto ({})", origin));
  if (rank == 0) {
    say(fmt::format("chosen: {}", best.plan.str()));
    write_text_file(path, text);
    say(fmt::format("plan saved to {} (repeat it with --set parallel.plan={})", path, path));
  }
  return config::parse_plan(text, name);
}

}  // namespace h2::cli
