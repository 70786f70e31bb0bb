// FlowNetwork: transfers as fluid flows over a cluster's links, for the cluster simulator. Every
// link has a bandwidth; a flow crosses a fixed path of links and has a number of bytes to move.
// Concurrent flows share each link max-min fairly (progressive filling: all rates rise together
// until a link saturates; its flows freeze at that rate, the others keep rising), the model
// flow-level simulators (SimGrid, SimAI's analytical mode) use for bandwidth sharing on networks
// without congestion control details. Rates change only when a flow starts or finishes, so time
// advances from event to event exactly (no time step).
//
// Use: start() flows at the current time, ask next_finish() when the earliest active one ends at
// the current rates, advance() to that time (or to an earlier one where the caller starts
// another flow) and collect the flows that finished. Latency is the caller's: start a flow once
// its first byte may leave. Times in seconds, sizes in bytes, bandwidths in bytes per second.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace h2::parallel::sim {

using FlowId = int64_t;

class FlowNetwork {
 public:
  // One link per entry (bandwidth > 0; inf allowed: a link that never limits).
  explicit FlowNetwork(std::vector<double> link_bandwidth);

  // Starts moving `bytes` (>= 0) over `links` (valid ids, no repeats; empty: limited by nothing,
  // finishes at once) at the current time. Re-shares every link on the path.
  FlowId start(std::vector<int> links, double bytes);
  // When the earliest active flow finishes if no flow starts before (infinity when none is
  // active).
  double next_finish() const;
  // Moves every active flow's bytes at the current rates up to time t (now() <= t <=
  // next_finish()) and returns the flows that are done at t, in start order.
  std::vector<FlowId> advance(double t);

  double now() const { return now_; }
  int active() const { return int(active_.size()); }
  // The current rate of an active flow (bytes per second); 0 for a finished one.
  double rate(FlowId id) const;

 private:
  struct Flow {
    FlowId id;
    std::vector<int> links;
    double remaining;
    double rate = 0;
  };
  void share();  // max-min fair rates of the active flows

  std::vector<double> bandwidth_;
  std::vector<Flow> active_;  // in start order
  FlowId next_id_ = 0;
  double now_ = 0;
};

}  // namespace h2::parallel::sim
