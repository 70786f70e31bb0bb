// The collectives whose cost is dominated by the number of messages, not their size: broadcast
// (binomial tree for small messages, pipelined chain for large ones), all-to-all with even or
// uneven blocks (every pair exchanges directly), and the dissemination barrier.
#pragma once

#include <cstddef>
#include <span>

#include "comm/algorithms/exchange.h"

namespace h2::comm {

// out = root's in on every rank; `in` is read on the root only.
void tree_broadcast(Exchange& ex, std::byte* out, const std::byte* in, size_t bytes, int root);
void chain_broadcast(Exchange& ex, std::byte* out, const std::byte* in, size_t bytes, int root,
                     size_t segment_bytes);
// Block sizes and offsets in bytes, one per rank.
void pairwise_all_to_all(Exchange& ex, std::byte* out, std::span<const size_t> recv_bytes,
                         std::span<const size_t> recv_offsets, const std::byte* in,
                         std::span<const size_t> send_bytes, std::span<const size_t> send_offsets);
// ceil(log2 n) rounds of empty messages to rank + 2^k.
void dissemination_barrier(Exchange& ex);

}  // namespace h2::comm
