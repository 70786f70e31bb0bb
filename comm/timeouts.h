// The one timeout every blocking communication call honours: H2_COMM_TIMEOUT seconds.
#pragma once

#include "comm/store.h"

namespace h2::comm {

// H2_COMM_TIMEOUT (seconds, may be fractional); ConfigError names a bad value.
Millis comm_timeout();

}  // namespace h2::comm
