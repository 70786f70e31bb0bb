// Small collectives through shared memory (see shm_path.h).
#include "comm/host/shm_path.h"

#include <fmt/format.h>
#include <sched.h>

#include <cstring>

#include "comm/algorithms/reduce_kernels.h"
#include "comm/comm_error.h"
#include "comm/timeouts.h"

namespace h2::comm {

void ShmPath::fail(const std::string& message, int blamed) {
  transport_.notify_abort(message, blamed);
  throw CommError(message);
}

template <class Ready>
void ShmPath::spin_until(const Ready& ready, const Signature& signature, int peer,
                         const char* waiting) {
  // The clock is read first at the 256th poll: most waits here are shorter than that, and a
  // clock read costs as much as the rest of a small collective's wait.
  WaitDeadline deadline(timeout_);
  for (uint64_t spins = 1; !ready(); ++spins) {
    // The transport keeps moving while this rank waits here (a peer may still be in an earlier
    // collective that needs this rank's progress to finish: a rendezvous send over TCP), every
    // 64th poll: a progress call costs several polls.
    if ((spins & 63) == 63) transport_.progress();
    if ((spins & 255) != 0) {
      if (spins >= spins_before_yield_) sched_yield();
      continue;
    }
    auto where = [&] {
      return fmt::format("rank {} in {} (shared memory, collective #{}, {} rank {})", slots_.rank(),
                         signature.str(), sequence_, waiting, peer);
    };
    if (auto failure = transport_.failure())
      fail(fmt::format("{} failed: {}", where(), failure->reason), -1);
    if (deadline.passed())
      fail(fmt::format("{} timed out after {:.0f} s (H2_COMM_TIMEOUT): rank {} died, hangs or did "
                       "not call {}",
                       where(), timeout_.count() / 1000.0, peer, collective_name(signature.kind)),
           peer);
    if (spins >= spins_before_yield_) sched_yield();
  }
}

void ShmPath::enter(const Signature& signature, const void* data, size_t bytes) {
  const uint64_t next = sequence_ + 1;
  // The page this collective writes was last read by collective next - 2; a peer seen entering
  // next - 1 had finished it.
  if (all_entered_ + 1 < next)
    for (int peer = 0; peer < slots_.size(); ++peer) {
      if (peer == slots_.rank()) continue;
      spin_until([&] { return slots_.finished(peer) + 2 >= next; }, signature, peer,
                 "waiting to reuse a page read by");
    }
  sequence_ = next;
  slots_.enter(sequence_, {signature.pack(), signature.count}, data, bytes);
}

void ShmPath::announce(const Signature& signature) {
  enter(signature, nullptr, 0);
}

void ShmPath::wait_for_peers(const Signature& signature) {
  const uint16_t mine = slots_.header(slots_.rank(), sequence_).signature;  // packed at enter
  for (int peer = 0; peer < slots_.size(); ++peer) {
    if (peer == slots_.rank()) continue;
    spin_until([&] { return slots_.entered(peer, sequence_); }, signature, peer, "waiting for");
    const SharedSlots::Header theirs = slots_.header(peer, sequence_);
    if (theirs.signature != mine)
      fail(fmt::format("mismatched collectives: rank {} called {} where rank {} called {} (shared "
                       "memory, collective #{})",
                       peer, signature.difference(theirs.signature), slots_.rank(), signature.str(),
                       sequence_),
           -1);
    if (theirs.count != signature.count)
      fail(fmt::format("mismatched collectives: rank {} passed {} elements where rank {} passed {} "
                       "to {} (the ranks disagree on the count)",
                       peer, theirs.count, slots_.rank(), signature.count, signature.str()),
           -1);
  }
  all_entered_ = sequence_;
}

void ShmPath::all_reduce(std::byte* out, const std::byte* in, int64_t count, DType dtype,
                         ReduceOp op, const Signature& signature) {
  const size_t bytes = size_t(dtype_storage_bytes(dtype, count));
  enter(signature, in, bytes);
  wait_for_peers(signature);
  // Rank order on every rank: the same bits everywhere. Reading every input before writing `out`
  // (which may be `in`, already copied to this rank's page) keeps in-place calls correct.
  const int n = slots_.size();
  if (bytes > 0) std::memcpy(out, slots_.data(0, sequence_), bytes);  // out is null for 0 bytes
  for (int r = 1; r < n; ++r)
    reduce_elements(out, out, slots_.data(r, sequence_), count, dtype, op);
  if (op == ReduceOp::avg) finish_avg(out, count, dtype, n);
  slots_.finish(sequence_);
}

void ShmPath::barrier(const Signature& signature) {
  enter(signature, nullptr, 0);
  wait_for_peers(signature);
  slots_.finish(sequence_);
}

}  // namespace h2::comm
