// The communication timeout from H2_COMM_TIMEOUT: seconds, fractional allowed, in (0, 1e6].
#include "comm/timeouts.h"

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

}  // namespace h2::comm
