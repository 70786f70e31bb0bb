// The cluster a command runs on (core/cluster.h): cluster.file, else H2_CLUSTER_FILE (which
// `h2run --cluster` sets), else none. Applied before the runtime exists: the cluster's chips are
// registered as virtual chips in rank order, rank r drives vchip:r, and a plan that names chips
// must name the ones the cluster puts on its ranks.
#pragma once

#include <optional>

#include "backends/registry.h"
#include "core/cluster.h"
#include "train/config/config.h"

namespace h2::cli {

std::optional<Cluster> job_cluster(const config::TrainConfig& config);

// Registers the cluster's chips in `options` and gives each rank a chip: cluster.devices names
// them (vchip:K, the cluster's chip K; or vchip:TYPE, the next free chip of that type in cluster
// order, as plan files do), or rank r takes chip r. Rewrites cluster.devices as vchip:K and
// returns K per rank. ConfigError naming the file when the job's ranks are not one per chip (with
// `whole_cluster` false, a job may leave chips out: planning and simulation), a chip is taken
// twice or a type has no free chip left.
std::vector<int> apply_cluster(const Cluster& cluster, config::TrainConfig& config,
                               RuntimeOptions& options, int world_size, bool whole_cluster = true);

}  // namespace h2::cli
