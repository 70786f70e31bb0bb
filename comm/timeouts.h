// How blocking communication calls wait: the one timeout they all honour (H2_COMM_TIMEOUT
// seconds) and how long they busy-poll before yielding the core.
#pragma once

#include <cstdint>

#include "comm/store.h"

namespace h2::comm {

// H2_COMM_TIMEOUT (seconds, may be fractional); ConfigError names a bad value.
Millis comm_timeout();

// CPUs this process may run on (its affinity mask; 1 when it cannot be read).
int usable_cpu_count();

// Polls of a transfer before its waiter yields the core between polls. Busy polling is the
// fastest wait while every rank on the node has a core of its own; with more local ranks than
// CPUs a spinning rank holds the core that the peer it waits for needs, so it yields at once.
uint64_t spins_before_yield(int local_ranks);

}  // namespace h2::comm
