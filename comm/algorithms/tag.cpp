// Signature packing and the words a mismatch report uses.
#include "comm/algorithms/tag.h"

#include <fmt/format.h>

namespace h2::comm {
namespace {

// 3 bits kind | 4 bits dtype | 2 bits op | 6 bits hash of (count, root).
constexpr int kKindShift = 12, kDTypeShift = 8, kOpShift = 6;

uint16_t count_hash(int64_t count, int root) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 8 count bytes and the root
  for (int i = 0; i < 8; ++i) h = (h ^ ((uint64_t(count) >> (8 * i)) & 0xff)) * 1099511628211ull;
  h = (h ^ uint64_t(uint32_t(root))) * 1099511628211ull;
  return uint16_t((h ^ (h >> 32)) & 0x3f);
}

CollectiveKind kind_of(uint16_t packed) {
  return CollectiveKind((packed >> kKindShift) & 0x7);
}
DType dtype_of(uint16_t packed) {
  return DType((packed >> kDTypeShift) & 0xf);
}
ReduceOp op_of(uint16_t packed) {
  return ReduceOp((packed >> kOpShift) & 0x3);
}

bool has_op(CollectiveKind kind) {
  return kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter;
}

}  // namespace

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_to_all:
      return "all_to_all";
    case CollectiveKind::barrier:
      return "barrier";
    case CollectiveKind::split:
      return "split";
  }
  return "?";
}

uint16_t Signature::pack() const {
  const ReduceOp packed_op = has_op(kind) ? op : ReduceOp::sum;
  return uint16_t((int(kind) << kKindShift) | (int(dtype) << kDTypeShift) |
                  (int(packed_op) << kOpShift) | count_hash(count, root));
}

std::string Signature::str() const {
  std::string s = fmt::format("{}({}", collective_name(kind), dtype_name(dtype));
  if (has_op(kind)) s += fmt::format(", {}", reduce_op_name(op));
  s += fmt::format(", count {}", count);
  if (kind == CollectiveKind::broadcast) s += fmt::format(", root {}", root);
  return s + ")";
}

std::string Signature::difference(uint16_t peer) const {
  if (kind_of(peer) != kind)
    return fmt::format("{} instead of {}", collective_name(kind_of(peer)), collective_name(kind));
  if (dtype_of(peer) != dtype)
    return fmt::format("dtype {} instead of {}", dtype_name(dtype_of(peer)), dtype_name(dtype));
  if (has_op(kind) && op_of(peer) != op)
    return fmt::format("op {} instead of {}", reduce_op_name(op_of(peer)), reduce_op_name(op));
  return kind == CollectiveKind::broadcast ? "a different count or root" : "a different count";
}

}  // namespace h2::comm
