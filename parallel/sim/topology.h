// Topology: a cluster's chips as FlowNetwork links, so that the simulator's transfers share
// bandwidth where real ones would.
//
// Every chip has a send and a receive port per link class (core/cluster.h): intra-node (its
// scale-up fabric to chips of its node), inter-node (its network interface toward chips of its
// type on other nodes) and cross-type (its path to other vendors' chips), each at its type's
// bandwidth for that class with the cluster's time_scale applied, as Cluster::link applies it.
// The switches behind the ports are non-blocking (no oversubscription modelled). A transfer from
// chip a to chip b crosses a's send port and b's receive port of the class
// Cluster::link_class(a, b): alone it takes exactly Cluster::link(a, b).seconds(bytes) (for
// cross-type, the slower chip's bandwidth), and transfers that leave or reach a chip over one
// class share that port. Latency is not a link's: the caller waits latency(a, b) before starting
// the flow.
#pragma once

#include <array>
#include <vector>

#include "core/cluster.h"
#include "parallel/sim/flow_network.h"

namespace h2::parallel::sim {

class Topology {
 public:
  // Keeps a reference to `cluster`, which must outlive the Topology.
  explicit Topology(const Cluster& cluster);

  int chips() const { return int(ports_.size()); }
  const std::vector<double>& link_bandwidth() const { return bandwidth_; }
  // The links a transfer from chip a to chip b (a != b) crosses.
  std::vector<int> path(int a, int b) const;
  double latency(int a, int b) const { return cluster_.link(a, b).latency; }
  int node_of(int chip) const { return cluster_.node_of(chip); }
  // Whether the chip's type moves device memory directly (ChipSpec::device_direct).
  bool device_direct(int chip) const { return cluster_.chip_of(chip).device_direct; }
  FlowNetwork network() const { return FlowNetwork(bandwidth_); }

 private:
  static constexpr int kClasses = 3;  // LinkClass values
  const Cluster& cluster_;
  std::vector<double> bandwidth_;
  // Per chip, per link class: {send port, receive port}; -1 where the cluster gives the chip's
  // type no link of that class (no transfer can need it).
  std::vector<std::array<std::array<int, 2>, kClasses>> ports_;
};

}  // namespace h2::parallel::sim
