// What `h2 profile`, `h2 plan` and `h2 train` with parallel.plan: auto share: the model shape a
// config describes, the profiles of a cluster's chip types (read from a folder where a file with
// the same key is, measured on a virtual chip of that type and written there otherwise), the
// search space a config implies, and the plan a search result becomes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "parallel/planner/datasheet_profile.h"
#include "parallel/planner/search.h"
#include "train/config/config.h"
#include "train/unit_profiler.h"

namespace h2::cli {

parallel::planner::ModelShape model_shape(const config::TrainConfig& config);

// The time scale virtual chips run at: the cluster's times H2_VCHIP_TIME_SCALE.
double emulation_time_scale(const Cluster& cluster);

struct ProfileRequest {
  std::string dir = "profiles";  // where profiles are cached
  bool remeasure = false;        // measure even when a matching file exists
  bool measure_missing = true;   // false: a missing profile is an error
  // Missing profiles are derived from the chips' data-sheet figures instead of measured
  // (parallel/planner/datasheet_profile.h): clusters that exist only on paper.
  bool datasheet = false;
  parallel::planner::Efficiency efficiency;
  train::ProfileOptions options;
  int threads = 0;  // CPU threads while measuring (0: the cores one rank of the job gets)
  std::function<void(const std::string&)> print;
};

// --datasheet and --efficiency, as h2 profile and h2 plan take them.
void add_datasheet_options(CLI::App& app, bool& datasheet, std::vector<double>& efficiency);

// Turns on data-sheet profiles with the given (GEMM, attention, memory) efficiencies, each in
// (0, 1]; none given keeps the defaults. `flag` names the option in errors.
void use_datasheet(ProfileRequest& request, const std::vector<double>& efficiency,
                   const std::string& flag);

// The chip types of `cluster` that have no cached profile for `config` in `dir`.
std::vector<std::string> missing_profiles(const Cluster& cluster, const config::TrainConfig& config,
                                          const std::string& dir);

// One profile per chip type of `cluster` for `config`'s model and dtype.
parallel::planner::Profiles cluster_profiles(const Cluster& cluster,
                                             const config::TrainConfig& config,
                                             const ProfileRequest& request);

// Classes the search expands at most by default: every small cluster's whole space, and about
// 10 s of search for 1,024 chips on 2 cores (docs/planner.md, "Search at scale").
inline constexpr int64_t kDefaultMaxClasses = 48;

// The search space of `config`: its global batch (train.batch_size x train.grad_accum x
// parallel.replicas sequences per step) kept fixed, every schedule, wire and FSDP choice.
parallel::planner::SearchSpace search_space(const config::TrainConfig& config);

// What h2 plan and h2 simulate stand on: a config, its cluster (or one chip type's part of it)
// and the profiles of the cluster's chip types (cached in a folder, measured or derived from
// data sheets when missing).
struct PlanningJob {
  config::TrainConfig config;
  Cluster cluster;
  parallel::planner::Profiles profiles;
  // Points into this job: keep the job where it is while the inputs are used.
  parallel::planner::CostInputs inputs() const {
    return {.cluster = &cluster,
            .model = model_shape(config),
            .dtype = config.train.dtype,
            .profiles = &profiles};
  }
};

struct PlanningSources {
  std::string config_path, cluster_path, part, profiles_dir = "profiles";
  std::vector<std::string> overrides;
  bool datasheet = false;
  std::vector<double> efficiency;  // --efficiency
};

// The options that fill `sources`: CONFIG, --cluster, --part, --profiles, --datasheet,
// --efficiency and --set.
void add_planning_options(CLI::App& app, PlanningSources& sources);

PlanningJob load_planning_job(const PlanningSources& sources);

// The plan file at `path` (a person's or h2 plan's) as the job would run it on `cluster` for
// `config`, with the cost model's estimate: the file is checked as h2 train checks it.
parallel::planner::Candidate evaluate_plan_file(const std::string& path, config::TrainConfig config,
                                                const Cluster& cluster,
                                                const parallel::planner::CostInputs& inputs);

}  // namespace h2::cli
