// Ring collectives, bandwidth-optimal for large messages: each rank sends and receives
// (n-1)/n of the data per phase, to its right and from its left neighbour, in pipelined
// segments. All buffers are host memory the transport reaches; `out` may equal `in`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/algorithms/exchange.h"
#include "comm/algorithms/partition.h"

namespace h2::comm {

struct RingOptions {
  size_t segment_bytes = size_t(1) << 20;
  std::vector<std::byte>* scratch = nullptr;  // grown as needed, owned by the communicator
};

// out = op over ranks of in (count elements). Reduce-scatter then all-gather.
void ring_all_reduce(Exchange& ex, std::byte* out, const std::byte* in, int64_t count, DType dtype,
                     ReduceOp op, const RingOptions& options);
// out (block elements) = op over ranks of block `rank` of in (size * block elements).
void ring_reduce_scatter(Exchange& ex, std::byte* out, const std::byte* in, int64_t block,
                         DType dtype, ReduceOp op, const RingOptions& options);
// Block r of out (size * block elements) = rank r's in.
void ring_all_gather(Exchange& ex, std::byte* out, const std::byte* in, int64_t block,
                     size_t element_bytes, const RingOptions& options);

}  // namespace h2::comm
