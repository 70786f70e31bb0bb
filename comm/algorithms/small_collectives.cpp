// Broadcast, all-to-all and barrier over an Exchange.
#include "comm/algorithms/small_collectives.h"

#include <cstring>
#include <vector>

#include "comm/algorithms/partition.h"

namespace h2::comm {

void tree_broadcast(Exchange& ex, std::byte* out, const std::byte* in, size_t bytes, int root) {
  const int n = ex.size(), r = ex.rank();
  const int relative = mod(r - root, n);
  if (relative == 0 && out != in) std::memmove(out, in, bytes);
  // Receive from the parent (the relative rank with its lowest set bit cleared).
  int mask = 1;
  while (mask < n) {
    if (relative & mask) {
      ex.wait(ex.recv(mod(relative - mask + root, n), 0, out, bytes));
      break;
    }
    mask <<= 1;
  }
  // Send to children relative + m for every m below that bit, largest subtree first.
  std::vector<OpId> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      sends.push_back(ex.send(mod(relative + mask + root, n), 0, out, bytes));
  ex.wait_all(sends);
}

void chain_broadcast(Exchange& ex, std::byte* out, const std::byte* in, size_t bytes, int root,
                     size_t segment_bytes) {
  const int n = ex.size(), r = ex.rank();
  const int relative = mod(r - root, n);
  const Partition p{int64_t(bytes), 1, int64_t(std::max<size_t>(segment_bytes, 1))};
  const int next = relative + 1 < n ? mod(r + 1, n) : -1;
  const std::byte* source = relative == 0 ? in : out;
  if (relative == 0 && out != in) std::memmove(out, in, bytes);
  std::vector<OpId> recvs, sends;
  if (relative > 0)
    for (int k = 0; k < p.segments(0); ++k)
      recvs.push_back(
          ex.recv(mod(r - 1, n), 0, out + p.segment_begin(0, k), size_t(p.segment_length(0, k))));
  for (int k = 0; k < p.segments(0); ++k) {
    if (relative > 0) ex.wait(recvs[k]);
    if (next >= 0)
      sends.push_back(
          ex.send(next, 0, source + p.segment_begin(0, k), size_t(p.segment_length(0, k))));
  }
  ex.wait_all(sends);
}

void pairwise_all_to_all(Exchange& ex, std::byte* out, std::span<const size_t> recv_bytes,
                         std::span<const size_t> recv_offsets, const std::byte* in,
                         std::span<const size_t> send_bytes, std::span<const size_t> send_offsets) {
  const int n = ex.size(), r = ex.rank();
  std::vector<OpId> ops;
  // Receives first so that no message waits unexpected; partners in rotating order spread load.
  for (int d = 1; d < n; ++d) {
    const int from = mod(r - d, n);
    ops.push_back(ex.recv(from, 0, out + recv_offsets[from], recv_bytes[from]));
  }
  for (int d = 1; d < n; ++d) {
    const int to = mod(r + d, n);
    ops.push_back(ex.send(to, 0, in + send_offsets[to], send_bytes[to]));
  }
  if (send_bytes[r] > 0) std::memmove(out + recv_offsets[r], in + send_offsets[r], send_bytes[r]);
  ex.wait_all(ops);
}

void dissemination_barrier(Exchange& ex) {
  const int n = ex.size(), r = ex.rank();
  for (int distance = 1, step = 0; distance < n; distance <<= 1, ++step) {
    const OpId got = ex.recv(mod(r - distance, n), step, nullptr, 0);
    const OpId sent = ex.send(mod(r + distance, n), step, nullptr, 0);
    ex.wait(got);
    ex.wait(sent);
  }
}

}  // namespace h2::comm
