// Honest emulation, watched while training: per logging interval, every rank's share of modelled
// time by which its host overran its emulated chip (kernels) and links (transfers), gathered from
// every rank. A figure from an emulated run means the chips it models only while these stay low
// (below 2%); above that the run measures the host. Real devices and links report nothing.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"

namespace h2::train {

class EmulationMonitor {
 public:
  EmulationMonitor(Device& device, comm::Communicator& job, Device& host);
  struct Shares {
    std::vector<double> kernels, links, total;  // per rank, in rank order
    // The rank with the largest total share (the first of equals); total must not be empty.
    size_t worst_rank() const;
  };
  // Collective. Each rank's overrun share since the last call, of its kernels, of its transfers
  // and of both; empty when no rank emulates anything.
  Shares interval_shares();

  static constexpr double kHonestLimit = 0.02;

 private:
  Device& device_;
  comm::Communicator& job_;
  Device& host_;
  PacingStats last_kernels_, last_links_;
};

// The progress line's warning when some rank's host overran its emulated chip and links by more
// than kHonestLimit of their modelled time in the interval: the worst rank, and its kernels' and
// links' shares, so that the advice names the knob that helps (links are paced by the cluster's
// time_scale alone; H2_VCHIP_TIME_SCALE paces chips). Empty when every rank kept up.
std::string overrun_warning(const EmulationMonitor::Shares& shares);

}  // namespace h2::train
