// The communication timeout from H2_COMM_TIMEOUT (seconds, fractional allowed, in (0, 1e6]) and
// the polling budget from the node's rank and CPU counts.
#include "comm/timeouts.h"

#include <sched.h>

#include <cmath>

#include "core/env.h"
#include "core/error.h"

namespace h2::comm {

Millis comm_timeout() {
  double seconds = env_double("H2_COMM_TIMEOUT", 0.0, 1e6);
  if (!(seconds > 0.0))
    H2_THROW(ConfigError, "H2_COMM_TIMEOUT={} must be above 0 seconds",
             env_string("H2_COMM_TIMEOUT"));
  // Round up so that a tiny positive value never becomes a zero (immediate) timeout.
  return Millis(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

int usable_cpu_count() {
  cpu_set_t allowed;
  return sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
}

std::vector<int> usable_cpus() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {0};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  return cpus;
}

uint64_t spins_before_yield(int local_ranks, int node_cpus) {
  return local_ranks > node_cpus ? 0 : 2000;
}

uint64_t spins_before_yield(int local_ranks) {
  return spins_before_yield(local_ranks, usable_cpu_count());
}

}  // namespace h2::comm
