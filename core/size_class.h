// The block sizes caching allocators (cpu, vchip, cuda) round requests to: multiples of
// `small_quantum` up to 4 KiB, then four classes per power of two (2^k * {1, 1.25, 1.5, 1.75}),
// so a cached block is reused for any request within 25% of it and wastes at most that much.
#pragma once

#include <bit>
#include <cstddef>

namespace h2 {

constexpr size_t allocation_size_class(size_t bytes, size_t small_quantum) {
  if (bytes <= 4096) return (bytes + small_quantum - 1) / small_quantum * small_quantum;
  size_t quarter = std::bit_floor(bytes) / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

}  // namespace h2
