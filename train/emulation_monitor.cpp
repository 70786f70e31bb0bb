// Overrun shares per interval (see emulation_monitor.h).
#include "train/emulation_monitor.h"

#include <fmt/format.h>

#include <algorithm>

#include "parallel/exact_gather.h"

namespace h2::train {

EmulationMonitor::EmulationMonitor(Device& device, comm::Communicator& job, Device& host)
    : device_(device),
      job_(job),
      host_(host),
      last_kernels_(device.pacing().value_or(PacingStats{})),
      last_links_(job.link_pacing()) {}

EmulationMonitor::Shares EmulationMonitor::interval_shares() {
  const PacingStats kernels = device_.pacing().value_or(PacingStats{}), links = job_.link_pacing();
  // [kernel modelled, kernel overrun, link modelled, link overrun] per rank.
  const std::vector<double> mine = {
      kernels.modelled_s - last_kernels_.modelled_s, kernels.overrun_s - last_kernels_.overrun_s,
      links.modelled_s - last_links_.modelled_s, links.overrun_s - last_links_.overrun_s};
  last_kernels_ = kernels, last_links_ = links;
  Shares shares;
  bool any = false;
  auto share = [](double overrun, double modelled) {
    return modelled > 0 ? overrun / modelled : 0.0;
  };
  for (const auto& r : parallel::gather_doubles(job_, host_, mine)) {
    any = any || r[0] > 0 || r[2] > 0;
    shares.kernels.push_back(share(r[1], r[0]));
    shares.links.push_back(share(r[3], r[2]));
    shares.total.push_back(share(r[1] + r[3], r[0] + r[2]));
  }
  if (!any) shares = {};
  return shares;
}

size_t EmulationMonitor::Shares::worst_rank() const {
  return size_t(std::max_element(total.begin(), total.end()) - total.begin());
}

std::string overrun_warning(const EmulationMonitor::Shares& shares) {
  if (shares.total.empty()) return {};
  const size_t worst = shares.worst_rank();
  if (!(shares.total[worst] > EmulationMonitor::kHonestLimit)) return {};
  const bool links = shares.links[worst] > 0;
  return fmt::format(
      "overrun {:.1f}% > {:.0f}% at rank {} (kernels {:.1f}%, links {:.1f}% of their modelled "
      "time): the host, not the chips, sets the pace; raise {}",
      100 * shares.total[worst], 100 * EmulationMonitor::kHonestLimit, worst,
      100 * shares.kernels[worst], 100 * shares.links[worst],
      links ? "the cluster's time_scale (H2_VCHIP_TIME_SCALE paces chips, not links)"
            : "the time scale (the cluster's time_scale or H2_VCHIP_TIME_SCALE)");
}

}  // namespace h2::train
