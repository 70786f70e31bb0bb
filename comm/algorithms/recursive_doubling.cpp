// Recursive doubling with the fold for non-powers of two (Rabenseifner's pre/post step):
// with p = 2^floor(log2 n) and e = n - p extra ranks, ranks 0..2e-1 pair up (even sends to odd),
// the odd ones and ranks >= 2e run the power-of-two exchange, then odd ranks send back.
// Steps: 0 fold, 1..log2(p) exchanges, 1+log2(p) unfold.
#include "comm/algorithms/recursive_doubling.h"

#include <bit>
#include <cstring>

#include "comm/algorithms/reduce_kernels.h"

namespace h2::comm {

void recursive_doubling_all_reduce(Exchange& ex, std::byte* out, const std::byte* in, int64_t count,
                                   DType dtype, ReduceOp op, std::vector<std::byte>& scratch) {
  const int n = ex.size(), r = ex.rank();
  const size_t bytes = size_t(dtype_storage_bytes(dtype, count));
  if (out != in) std::memmove(out, in, bytes);
  if (n == 1) return;
  if (scratch.size() < std::max<size_t>(bytes, 1)) scratch.resize(std::max<size_t>(bytes, 1));
  std::byte* incoming = scratch.data();

  const int p = int(std::bit_floor(unsigned(n))), extra = n - p;
  int virtual_rank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      ex.wait(ex.send(r + 1, 0, out, bytes));
      virtual_rank = -1;
    } else {
      ex.wait(ex.recv(r - 1, 0, incoming, bytes));
      reduce_elements(out, out, incoming, count, dtype, op);
      virtual_rank = r / 2;
    }
  } else {
    virtual_rank = r - extra;
  }

  int step = 1;
  if (virtual_rank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1, ++step) {
      const int partner_virtual = virtual_rank ^ mask;
      const int partner =
          partner_virtual < extra ? 2 * partner_virtual + 1 : partner_virtual + extra;
      const OpId got = ex.recv(partner, step, incoming, bytes);
      const OpId sent = ex.send(partner, step, out, bytes);
      ex.wait(got);
      ex.wait(sent);
      reduce_elements(out, out, incoming, count, dtype, op);
    }
    if (op == ReduceOp::avg) finish_avg(out, count, dtype, n);
  } else {
    step += std::countr_zero(unsigned(p));
  }

  if (r < 2 * extra) {
    if (r % 2 == 1)
      ex.wait(ex.send(r - 1, step, out, bytes));
    else
      ex.wait(ex.recv(r + 1, step, out, bytes));
  }
}

}  // namespace h2::comm
