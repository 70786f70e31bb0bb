// Transport: moves bytes between the ranks of one group by tagged, non-blocking sends and
// receives. The host communicator builds every collective on it; UCX is the implementation here.
// Not thread-safe: one thread drives a transport at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "comm/store.h"
#include "core/device.h"

namespace h2::comm {

class SharedSlots;  // transports/shm/shared_slots.h

using OpId = int64_t;

// What a finished receive learned: the sender's full tag and the bytes that arrived.
struct Completion {
  uint64_t sender_tag = 0;
  size_t bytes = 0;
};

// A peer that is gone (endpoint error) or that aborted the job and told us why.
struct PeerFailure {
  int rank = -1;
  std::string reason;
};

// What a rank that gave up told the others: why, and the peer it was waiting for (-1: none).
struct AbortNotice {
  std::string reason;
  int blamed = -1;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "ucx(posix,cma,tcp)"
  // Whether `device`'s memory may be handed to post_send/post_recv directly (else the caller
  // stages through host memory). Asked of the transport's build, never assumed.
  virtual bool reaches(const Device& device) const = 0;

  // Posts a transfer; `data` must stay valid until it completes or cancel_all() returned.
  // A receive matches a send from `peer` whose tag equals `tag` on the bits set in `mask`.
  virtual OpId post_send(int peer, uint64_t tag, const void* data, size_t bytes) = 0;
  virtual OpId post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) = 0;
  // Makes progress; returns the completion once `op` finished (the id is then released), nullopt
  // while in flight. Throws CommError when the transfer itself failed (message truncated, ...).
  virtual std::optional<Completion> test(OpId op) = 0;
  // Makes progress on everything in flight; returns whether anything happened.
  virtual bool progress() = 0;
  // The first peer failure seen (endpoint error, a local peer's process gone, or an abort
  // notice), if any. Cheap enough to call in every wait loop: probes are rate-limited.
  virtual std::optional<PeerFailure> failure() = 0;
  // Best effort: tells every peer that this rank gives up, so they fail fast instead of waiting
  // for the timeout. `blamed` is the peer this rank was waiting for (-1: none): that peer does
  // not take the notice as a failure, since it is itself waiting on the real cause and will
  // report it. Returns within a fraction of a second.
  virtual void notify_abort(const std::string& reason, int blamed = -1) = 0;
  // The first abort notice received from `rank`, if any (blaming notices included): why it
  // gave up.
  virtual std::optional<AbortNotice> notice_from(int rank) const = 0;
  // How many abort notices blamed this rank (peers that gave up waiting for it), and the rank that
  // sent the last one (-1: none). A rank blamed while it waits itself is not the cause: its wait
  // gives up at once and names the peer it waits for (comm/algorithms/give_up.h).
  virtual uint64_t blame_count() const = 0;
  virtual int last_blamer() const = 0;
  // Cancels every transfer in flight and waits (briefly) until none touches its buffer.
  virtual void cancel_all() = 0;
  // Shared memory among the group's ranks when they all run on this host and the bytes they
  // exchange cost nothing but the copy (not on emulated links); null otherwise.
  virtual SharedSlots* shared_slots() { return nullptr; }
};

}  // namespace h2::comm
