// How blocking communication calls wait: the one timeout they all honour (H2_COMM_TIMEOUT
// seconds) and how long they busy-poll before yielding the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/store.h"

namespace h2::comm {

// H2_COMM_TIMEOUT (seconds, may be fractional); ConfigError names a bad value.
Millis comm_timeout();

// The deadline of one wait, which reads the clock only when first asked: a waiter asks every
// few hundred polls, most short waits end before it ever does, and a clock read costs as much
// as such a wait. The timeout counts from that first question.
class WaitDeadline {
 public:
  explicit WaitDeadline(Millis timeout) : timeout_(timeout) {}
  // False the first time (the deadline is set then); afterwards whether it has passed.
  bool passed() {
    const auto now = std::chrono::steady_clock::now();
    if (deadline_ == kUnset) {
      deadline_ = now + timeout_;
      return false;
    }
    return now > deadline_;
  }

 private:
  static constexpr auto kUnset = std::chrono::steady_clock::time_point::max();
  Millis timeout_;
  std::chrono::steady_clock::time_point deadline_ = kUnset;
};

// CPUs this process may run on (its affinity mask; 1 when it cannot be read), and which.
int usable_cpu_count();
std::vector<int> usable_cpus();

// Polls of a transfer before its waiter yields the core between polls. Busy polling is the
// fastest wait while every rank on the node has a core of its own; with more local ranks than
// the CPUs they may run on together (`node_cpus`: the union of their affinity masks) a spinning
// rank holds the core that the peer it waits for needs, so it yields at once. The one-argument
// form takes this process's mask for the node's, which is right unless a launcher bound each rank
// to cores of its own (then World::join passes the union).
uint64_t spins_before_yield(int local_ranks, int node_cpus);
uint64_t spins_before_yield(int local_ranks);

}  // namespace h2::comm
