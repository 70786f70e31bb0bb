// The 64-bit tag every transfer carries. It names the sender (tag matching does not), tells user
// point-to-point traffic from collective traffic, and lets a receiver detect a peer that runs a
// different collective (kind, dtype, op or count) or is a collective ahead:
//
//   bits 48..63  sender rank                         matched
//   bit  47      1 = collective, 0 = point-to-point  matched
//   p2p:         bits 0..46 the user's tag           matched
//   collective:  bits 32..46 signature               checked after arrival
//                bits 16..31 collective sequence     checked after arrival
//                bits  0..15 algorithm step          matched
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "core/dtype.h"

namespace h2::comm {

enum class CollectiveKind : uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  all_to_all,
  barrier,
  split
};
const char* collective_name(CollectiveKind kind);

// What every rank must agree on; packs into 15 bits (count reduced to a 5-bit hash).
struct Signature {
  CollectiveKind kind = CollectiveKind::barrier;
  DType dtype = DType::u8;
  ReduceOp op = ReduceOp::sum;
  int64_t count = 0;  // elements per rank's input
  int root = 0;       // broadcast only

  uint16_t pack() const;
  // "all_reduce(f32, sum, count 4096)"
  std::string str() const;
  // What differs from a peer's packed signature: "all_gather instead of all_reduce",
  // "dtype bf16 instead of f32", "a different count or root".
  std::string difference(uint16_t peer_packed) const;
};

inline constexpr int kRankShift = 48;
inline constexpr uint64_t kRankMask = uint64_t(0xffff) << kRankShift;
inline constexpr uint64_t kCollectiveBit = uint64_t(1) << 47;
inline constexpr uint64_t kSignatureMask = uint64_t(0x7fff) << 32;
inline constexpr uint64_t kSequenceMask = uint64_t(0xffff) << 16;
inline constexpr uint64_t kStepMask = 0xffff;
inline constexpr uint64_t kUserTagMask = (uint64_t(1) << 47) - 1;
inline constexpr int kMaxRanks = 1 << 16;

inline uint64_t p2p_tag(int sender, int user_tag) {
  return (uint64_t(sender) << kRankShift) | (uint64_t(user_tag) & kUserTagMask);
}
inline constexpr uint64_t kP2pMask = ~uint64_t(0);

inline uint64_t collective_tag(int sender, uint16_t signature, uint16_t sequence, int step) {
  return (uint64_t(sender) << kRankShift) | kCollectiveBit | (uint64_t(signature) << 32) |
         (uint64_t(sequence) << 16) | (uint64_t(step) & kStepMask);
}
// A collective receive matches sender, kind of traffic and step; signature and sequence are
// compared after arrival so that a mismatch is reported instead of waited on.
inline constexpr uint64_t kCollectiveMask = kRankMask | kCollectiveBit | kStepMask;

inline int tag_sender(uint64_t tag) {
  return int(tag >> kRankShift);
}
inline uint16_t tag_signature(uint64_t tag) {
  return uint16_t((tag & kSignatureMask) >> 32);
}
inline uint16_t tag_sequence(uint64_t tag) {
  return uint16_t((tag & kSequenceMask) >> 16);
}

}  // namespace h2::comm
