// Every rank's doubles, exactly. The communicator reduces no f64, and summing floats over ranks
// would round differently from one process adding the same numbers in order; so doubles travel as
// their bit patterns (i64) and the caller adds them in whatever order one process would.
#pragma once

#include <vector>

#include "comm/communicator.h"

namespace h2::parallel {

// out[r] = rank r's `values` (every rank passes the same count). Collective over `group`.
std::vector<std::vector<double>> gather_doubles(comm::Communicator& group, Device& host,
                                                const std::vector<double>& values);

}  // namespace h2::parallel
