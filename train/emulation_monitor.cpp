// Overrun shares per interval (see emulation_monitor.h).
#include "train/emulation_monitor.h"

#include "parallel/exact_gather.h"

namespace h2::train {

EmulationMonitor::EmulationMonitor(Device& device, comm::Communicator& job, Device& host)
    : device_(device), job_(job), host_(host), last_(now()) {}

PacingStats EmulationMonitor::now() const {
  PacingStats total = device_.pacing().value_or(PacingStats{});
  total += job_.link_pacing();
  return total;
}

std::vector<double> EmulationMonitor::interval_shares() {
  const PacingStats current = now();
  const double modelled = current.modelled_s - last_.modelled_s;
  const double overrun = current.overrun_s - last_.overrun_s;
  last_ = current;
  // [modelled, overrun] per rank; a rank that emulates nothing sends zeros.
  const auto all = parallel::gather_doubles(job_, host_, {modelled, overrun});
  std::vector<double> shares;
  bool any = false;
  for (const auto& r : all) {
    any = any || r[0] > 0;
    shares.push_back(r[0] > 0 ? r[1] / r[0] : 0.0);
  }
  if (!any) shares.clear();
  return shares;
}

}  // namespace h2::train
