// SharedSlots: one shared-memory segment among the ranks of a group that all run on one host, for
// collectives so small that a message's fixed cost is all they cost (all-reduce of a few KiB,
// barrier). Each rank owns a slot; it publishes into its own and reads its peers' in place, with
// no transfer. A slot:
//
//   page[2]    for collectives of even and of odd number: the number of the collective the page
//              was last written for, its signature (packed kind, dtype and op) and exact count,
//              and a buffer of kDataBytes, the first bytes of which share the number's cache line
//              (a peer waiting for a small collective fetches one line);
//   finished   the number of the last collective the rank completed (its peers' data read).
//
// Every collective of the communicator enters its page, whatever path it takes, so that a peer
// running another collective is reported instead of waited on. Ordering: a rank writes page[k % 2]
// for collective k only once every peer has finished k - 2 (the last collective to read that
// page), and stores the page's number k with release semantics after the rest of it; a reader
// that loaded the number k with acquire semantics may read the page until it finishes k itself
// (the owner cannot reach k + 2 before that). Numbers start at 1.
//
// Set-up goes through the rendezvous store: rank 0 creates and sizes the segment under a name
// unique to the group, the others map it, and rank 0 unlinks the name once all have, so nothing
// outlives the job even when a rank dies later. Not thread-safe (one thread drives a
// communicator); the segment is unmapped on destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/store.h"

namespace h2::comm {

class SharedSlots {
 public:
  static constexpr size_t kDataBytes = 4096;

  // What a rank announced for one collective.
  struct Header {
    uint16_t signature = 0;
    int64_t count = 0;
  };

  // Collective over the group (through `store`, keys under `prefix`): rank 0 creates the segment,
  // everyone maps it. `group_id` makes the segment's name unique on the host (rank 0's process id
  // and the group's prefix).
  static std::unique_ptr<SharedSlots> create(Store& store, const std::string& prefix,
                                             const std::string& group_id, int rank, int size,
                                             Millis timeout);
  ~SharedSlots();
  SharedSlots(const SharedSlots&) = delete;
  SharedSlots& operator=(const SharedSlots&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // The last collective `peer` completed (acquire).
  uint64_t finished(int peer) const {
    return std::atomic_ref<uint64_t>(slot(peer).finished).load(std::memory_order_acquire);
  }
  // Announces collective `sequence` (once every peer finished sequence - 2), first writing its
  // header and `bytes` (<= kDataBytes) of `data` (none when null) into this rank's page for it.
  void enter(uint64_t sequence, Header header, const void* data, size_t bytes);
  // Whether `peer` entered collective `sequence` (or a later one) (acquire). Inline: waiters
  // poll it in a tight loop.
  bool entered(int peer, uint64_t sequence) const {
    return std::atomic_ref<uint64_t>(slot(peer).page[sequence % 2].sequence)
               .load(std::memory_order_acquire) >= sequence;
  }
  // `peer`'s header and data of collective `sequence`, once entered(peer, sequence).
  Header header(int peer, uint64_t sequence) const {
    const Slot::Page& page = slot(peer).page[sequence % 2];
    return {page.signature, page.count};
  }
  const std::byte* data(int peer, uint64_t sequence) const {
    return slot(peer).page[sequence % 2].data;
  }
  // This rank completed collective `sequence` (release).
  void finish(uint64_t sequence) {
    std::atomic_ref<uint64_t>(slot(rank_).finished).store(sequence, std::memory_order_release);
  }

 private:
  struct Slot {
    struct alignas(64) Page {
      uint64_t sequence;  // atomic through std::atomic_ref
      int64_t count;
      uint16_t signature;
      // From byte 32 (aligned for every element type and 16-byte vector loads: the reductions
      // read it as float, int64 ...); its first 32 bytes share the sequence's cache line.
      alignas(16) std::byte data[kDataBytes];
    };
    Page page[2];
    alignas(64) uint64_t finished;  // atomic through std::atomic_ref
  };
  SharedSlots(void* base, size_t bytes, int rank, int size);
  Slot& slot(int rank) const { return static_cast<Slot*>(base_)[rank]; }

  void* base_ = nullptr;
  size_t bytes_ = 0;
  int rank_ = 0, size_ = 1;
};

}  // namespace h2::comm
