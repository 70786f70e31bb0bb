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
  // Collective. Each rank's overrun share since the last call (kernels and transfers together),
  // in rank order; empty when no rank emulates anything.
  std::vector<double> interval_shares();

  static constexpr double kHonestLimit = 0.02;

 private:
  PacingStats now() const;
  Device& device_;
  comm::Communicator& job_;
  Device& host_;
  PacingStats last_;
};

}  // namespace h2::train
