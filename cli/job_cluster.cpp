// The job's cluster (see job_cluster.h).
#include "cli/job_cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/vchip/cluster_file.h"
#include "core/env.h"
#include "core/error.h"

namespace h2::cli {

std::optional<Cluster> job_cluster(const config::TrainConfig& config) {
  std::string path = config.cluster.file;
  if (path.empty()) path = env_string("H2_CLUSTER_FILE");
  if (path.empty()) return std::nullopt;
  return vchip::load_cluster(path);
}

std::vector<int> apply_cluster(const Cluster& cluster, config::TrainConfig& config,
                               RuntimeOptions& options, int world_size, bool whole_cluster) {
  if (whole_cluster ? cluster.size() != world_size : cluster.size() < world_size)
    H2_THROW(ConfigError,
             "{}: the cluster has {} chips but the job has {} ranks; start one rank per chip "
             "(h2run -n {} --cluster {})",
             cluster.source, cluster.size(), world_size, cluster.size(), cluster.source);
  std::vector<int> chips(static_cast<size_t>(world_size));
  std::vector<bool> taken(size_t(cluster.size()), false);
  for (int r = 0; r < world_size; ++r) {
    int chip = r;
    if (!config.cluster.devices.empty()) {
      const std::string given = config::device_for_rank(config, r, world_size);
      const std::string name = given.starts_with("vchip:") ? given.substr(6) : given;
      chip = -1;
      if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
        chip = std::stoi(name);
        if (chip >= cluster.size() || taken[size_t(chip)]) chip = -2;
      } else {
        for (int c = 0; c < cluster.size() && chip < 0; ++c)
          if (!taken[size_t(c)] && cluster.chip_of(c).name == name) chip = c;
      }
      if (chip < 0)
        H2_THROW(ConfigError,
                 "cluster.devices ({}) puts rank {} on {}, but {} has no free chip of that "
                 "name (its chips: {}); name each rank's chip type or vchip:K once",
                 config.origin_of("cluster.devices"), r, given, cluster.source,
                 fmt::join(cluster.chip_types(), ", "));
    }
    taken[size_t(chip)] = true;
    chips[size_t(r)] = chip;
  }
  std::vector<std::string> devices;
  for (int chip : chips) devices.push_back(fmt::format("vchip:{}", chip));
  options.chips = vchip::cluster_chips(cluster);
  config.cluster.devices = fmt::format("{}", fmt::join(devices, ","));
  config.origin["cluster.devices"] = cluster.source;
  return chips;
}

}  // namespace h2::cli
