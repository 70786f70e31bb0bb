// parallel.plan: auto: HeteroAuto plans the job at start. Every rank reads the same cached
// profiles (rank 0 measures the missing ones first while the others wait for its files) and runs
// the same deterministic search, so every rank arrives at the same plan without talking; rank 0
// prints the chosen plan, why it won and the runners-up, and saves it beside the checkpoints
// (plan.yaml) so that the run can be repeated with parallel.plan set to that file.
#pragma once

#include <functional>
#include <string>

#include "core/cluster.h"
#include "train/config/config.h"
#include "train/config/plan.h"

namespace h2::cli {

// The plan of `config` (whose parallel.plan is "auto") on `cluster` for a job of `world_size`
// ranks; `rank` is this process's. ConfigError when the cluster's chips are not the job's ranks
// or no plan fits.
config::Plan auto_plan(const config::TrainConfig& config, const Cluster& cluster, int rank,
                       int world_size, const std::function<void(const std::string&)>& print);

}  // namespace h2::cli
