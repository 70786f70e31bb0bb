// Recursive-doubling all-reduce, latency-optimal for small messages: log2(n) exchanges of the
// whole buffer with partner rank ^ 2^k. A world that is not a power of two first folds its
// extra ranks into their neighbours and hands them the result at the end. Every rank computes
// the same sums in the same pairing, so all ranks end with identical bits.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/algorithms/exchange.h"

namespace h2::comm {

void recursive_doubling_all_reduce(Exchange& ex, std::byte* out, const std::byte* in, int64_t count,
                                   DType dtype, ReduceOp op, std::vector<std::byte>& scratch);

}  // namespace h2::comm
