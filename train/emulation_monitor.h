// Honest emulation, watched while training: per logging interval, every rank's share of modelled
// time by which its host overran its emulated chip (kernels) and links (transfers), gathered from
// every rank. A figure from an emulated run means the chips it models only while these stay low
// (below 2%); above that the run measures the host. Real devices and links report nothing.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "core/device.h"

namespace h2::train {

class EmulationMonitor {
 public:
  EmulationMonitor(Device& device, comm::Communicator& job, Device& host);
  struct Shares {
    std::vector<double> kernels, links, total;  // per rank, in rank order
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

}  // namespace h2::train
