// ShmPath: the host communicator's collectives through shared memory (SharedSlots), for groups
// whose ranks all run on one host: all-reduce of at most SharedSlots::kDataBytes and the barrier
// cost a few cache-line transfers instead of a message round trip through the transport.
//
// Every collective of the communicator goes through announce()/complete() or one of the two
// collectives here, in call order, so that the slots' numbering is the communicator's; a peer
// that announced another collective is reported as a mismatch (and told, through the transport's
// abort notice, if it waits on the transport). All-reduce: each rank publishes its input, then
// every rank combines all inputs in rank order (0, 1, ..., n - 1), so every rank gets the same
// bits. Waits are bounded by the communicator's timeout and cut short by a peer's failure, like
// the transport's (exchange.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/algorithms/tag.h"
#include "comm/transports/shm/shared_slots.h"
#include "comm/transports/transport.h"

namespace h2::comm {

class ShmPath {
 public:
  ShmPath(SharedSlots& slots, Transport& transport, Millis timeout, uint64_t spins_before_yield)
      : slots_(slots),
        transport_(transport),
        timeout_(timeout),
        spins_before_yield_(spins_before_yield) {}

  // Whether an all-reduce of `bytes` per rank goes through shared memory.
  static bool takes_all_reduce(size_t bytes) { return bytes <= SharedSlots::kDataBytes; }

  // A collective that runs on the transport: announced before it starts, completed after.
  void announce(const Signature& signature);
  void complete() { slots_.finish(sequence_); }

  // out = op over ranks of in (count elements of dtype; out may equal in).
  void all_reduce(std::byte* out, const std::byte* in, int64_t count, DType dtype, ReduceOp op,
                  const Signature& signature);
  void barrier(const Signature& signature);

 private:
  // Waits until this rank may write its next page, then enters the next collective with it.
  void enter(const Signature& signature, const void* data, size_t bytes);
  // Waits until every peer entered the current collective; checks that it is the same one.
  void wait_for_peers(const Signature& signature);
  template <class Ready>
  void spin_until(const Ready& ready, const Signature& signature, int peer, const char* waiting);
  [[noreturn]] void fail(const std::string& message, int blamed);

  SharedSlots& slots_;
  Transport& transport_;
  Millis timeout_;
  uint64_t spins_before_yield_;
  uint64_t sequence_ = 0;  // the current collective's number (slots count from 1)
  // The last collective every peer was seen to enter: each had finished the one before it.
  uint64_t all_entered_ = 0;
};

}  // namespace h2::comm
