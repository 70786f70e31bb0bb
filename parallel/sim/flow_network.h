// FlowNetwork: transfers as fluid flows over a cluster's links, for the cluster simulator. Every
// link has a bandwidth; a flow crosses a fixed path of links and has a number of bytes to move.
// Concurrent flows share each link max-min fairly (progressive filling: all rates rise together
// until a link saturates; its flows freeze at that rate, the others keep rising), the sharing
// model of flow-level simulators such as SimGrid's, which leave congestion control out. Rates
// change only when a flow starts or finishes, so time advances from event to event exactly (no time
// step). A start or a finish re-shares only the flows connected to it through shared links, and
// finish times wait in a heap, so an event costs its component, not the whole network (a 1,000-chip
// step has many small components).
//
// Use: start() flows at the current time, ask next_finish() when the earliest active one ends at
// the current rates, advance() to that time (or to an earlier one where the caller starts
// another flow) and collect the flows that finished. Latency is the caller's: start a flow once
// its first byte may leave. Times in seconds, sizes in bytes, bandwidths in bytes per second.
#pragma once

#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

namespace h2::parallel::sim {

using FlowId = int64_t;

class FlowNetwork {
 public:
  // One link per entry (bandwidth > 0; inf allowed: a link that never limits).
  explicit FlowNetwork(std::vector<double> link_bandwidth);

  // Starts moving `bytes` (>= 0) over `links` (valid ids, no repeats; empty: limited by nothing,
  // finishes at once) at the current time. Flows are numbered 0, 1, 2, ... in start order.
  FlowId start(std::vector<int> links, double bytes);
  // When the earliest active flow finishes if no flow starts before (infinity when none is
  // active).
  double next_finish() const;
  // Moves every active flow's bytes at the current rates up to time t (now() <= t <=
  // next_finish()) and returns the flows that are done at t, in start order.
  std::vector<FlowId> advance(double t);

  double now() const { return now_; }
  int active() const { return active_; }
  // The current rate of an active flow (bytes per second); 0 for a finished one.
  double rate(FlowId id) const;

 private:
  struct Flow {
    std::vector<int> links;
    double remaining = 0;  // bytes left at time `updated`
    double updated = 0;
    double rate = 0;
    uint64_t version = 0;  // bumped whenever the rate changes: older finish entries are stale
    bool active = true;
  };
  struct Finish {
    double time;
    FlowId id;
    uint64_t version;
    bool operator>(const Finish& o) const { return time > o.time || (time == o.time && id > o.id); }
  };
  // Re-shares the flows connected to `links` through shared links (only their rates can
  // change), bringing their bytes up to now first.
  void reshare(const std::vector<int>& links);
  void drop_stale() const;  // pops finish entries of finished flows or of changed rates

  std::vector<double> bandwidth_;
  std::vector<Flow> flows_;                   // by id; finished ones stay, inactive
  std::vector<std::vector<FlowId>> on_link_;  // the active flows crossing each link
  mutable std::priority_queue<Finish, std::vector<Finish>, std::greater<>> finishes_;
  int active_ = 0;
  double now_ = 0;
  // Scratch of reshare(), kept to avoid reallocation: per link, the component round's marks.
  std::vector<int> link_mark_;
  std::vector<double> link_left_;
  std::vector<int> link_unfrozen_;
  int mark_ = 0;
};

}  // namespace h2::parallel::sim
