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

uint64_t spins_before_yield(int local_ranks) {
  return local_ranks > usable_cpu_count() ? 0 : 2000;
}

}  // namespace h2::comm
