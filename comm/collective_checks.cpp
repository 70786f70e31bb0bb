// Argument checks shared by every Communicator (see collective_checks.h).
#include "comm/collective_checks.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"

namespace h2::comm {
namespace {

void check_defined(const Tensor& t, std::string_view role, std::string_view who) {
  H2_CHECK(t.defined(), "{}: `{}` is an undefined tensor", who, role);
}

void check_same_dtype(const Tensor& out, const Tensor& in, std::string_view who) {
  H2_CHECK(out.dtype() == in.dtype(), "{}: out {} and in {} must have the same dtype", who,
           out.str(), in.str());
}

// The contract: out and in are the same tensor (in place) or do not share a byte.
void check_no_partial_overlap(const Tensor& out, const Tensor& in, std::string_view who) {
  H2_CHECK(same_view(out, in) || !out.may_alias(in),
           "{}: out {} and in {} overlap without being the same tensor (in place)", who, out.str(),
           in.str());
}

// NCCL's in-place convention for reduce_scatter and all_gather: the per-rank tensor is block
// `rank` of the whole one. Both must be contiguous; otherwise they must not overlap.
void check_block_overlap(const Tensor& block, const Tensor& whole, int rank, std::string_view who) {
  if (!block.may_alias(whole)) return;
  const auto* start = static_cast<const std::byte*>(whole.data());
  const auto* own = start + dtype_storage_bytes(whole.dtype(), int64_t(rank) * block.numel());
  H2_CHECK(block.is_contiguous() && whole.is_contiguous() && block.data() == own,
           "{}: {} overlaps {} but is not its block {} (in place means the rank's own block)", who,
           block.str(), whole.str(), rank);
}

// f4e2m1 packs two elements per byte: a block must not split one.
void check_whole_bytes(DType dtype, int64_t count, std::string_view what, std::string_view who) {
  H2_CHECK(dtype_bits(dtype) % 8 == 0 || count % 2 == 0,
           "{}: {} has {} {} elements, which splits a byte; use an even count", who, what, count,
           dtype_name(dtype));
}

void check_op(ReduceOp op, DType dtype, std::string_view who) {
  if (!reduce_op_valid(op, dtype))
    H2_THROW(UnsupportedError, "{}: reduce op {} is not defined on dtype {}{}", who,
             reduce_op_name(op), dtype_name(dtype),
             op == ReduceOp::avg ? " (avg is for floating dtypes; use sum and divide)" : "");
}

void check_counts(std::span<const int64_t> counts, int size, std::string_view name,
                  std::string_view who) {
  H2_CHECK(std::ssize(counts) == size, "{}: {} has {} entries; expected one per rank ({})", who,
           name, counts.size(), size);
  for (size_t i = 0; i < counts.size(); ++i)
    H2_CHECK(counts[i] >= 0, "{}: {}[{}] = {} is negative", who, name, i, counts[i]);
}

}  // namespace

bool reduce_op_valid(ReduceOp op, DType dtype) {
  if (dtype == DType::f4e2m1) return false;
  return op != ReduceOp::avg || is_floating(dtype);
}

bool same_view(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return false;
  return a.data() == b.data() && a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

void check_rank(int peer, int size, std::string_view role, std::string_view who) {
  H2_CHECK(peer >= 0 && peer < size, "{}: {} {} is not a rank of this communicator (size {})", who,
           role, peer, size);
}

void check_all_reduce(const Tensor& out, const Tensor& in, ReduceOp op, std::string_view who) {
  check_defined(out, "out", who);
  check_defined(in, "in", who);
  check_same_dtype(out, in, who);
  H2_CHECK(out.numel() == in.numel(), "{}: out {} and in {} must have equal element counts", who,
           out.str(), in.str());
  check_no_partial_overlap(out, in, who);
  check_op(op, in.dtype(), who);
}

void check_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, int rank, int size,
                          std::string_view who) {
  check_defined(out, "out", who);
  check_defined(in, "in", who);
  check_same_dtype(out, in, who);
  H2_CHECK(in.numel() == int64_t(size) * out.numel(),
           "{}: in {} must have size ({}) x out.numel() ({}) = {} elements, has {}", who, in.str(),
           size, out.numel(), int64_t(size) * out.numel(), in.numel());
  check_block_overlap(out, in, rank, who);
  check_op(op, in.dtype(), who);
}

void check_all_gather(const Tensor& out, const Tensor& in, int rank, int size,
                      std::string_view who) {
  check_defined(out, "out", who);
  check_defined(in, "in", who);
  check_same_dtype(out, in, who);
  H2_CHECK(out.numel() == int64_t(size) * in.numel(),
           "{}: out {} must have size ({}) x in.numel() ({}) = {} elements, has {}", who, out.str(),
           size, in.numel(), int64_t(size) * in.numel(), out.numel());
  check_block_overlap(in, out, rank, who);
  check_whole_bytes(in.dtype(), in.numel(), "each rank's block", who);
}

void check_broadcast(const Tensor& out, const Tensor& in, int root, int rank, int size,
                     std::string_view who) {
  check_rank(root, size, "root", who);
  check_defined(out, "out", who);
  if (rank == root) check_defined(in, "in (on the root)", who);
  if (!in.defined()) return;
  check_same_dtype(out, in, who);
  H2_CHECK(out.numel() == in.numel(), "{}: out {} and in {} must have equal element counts", who,
           out.str(), in.str());
  check_no_partial_overlap(out, in, who);
}

void check_all_to_all(const Tensor& out, const Tensor& in, int size, std::string_view who) {
  check_defined(out, "out", who);
  check_defined(in, "in", who);
  check_same_dtype(out, in, who);
  H2_CHECK(out.numel() == in.numel() && in.numel() % size == 0,
           "{}: out {} and in {} must have equal element counts, a multiple of size ({})", who,
           out.str(), in.str(), size);
  check_no_partial_overlap(out, in, who);
  check_whole_bytes(in.dtype(), in.numel() / size, "each block", who);
}

void check_all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                        std::span<const int64_t> send_counts, int size, std::string_view who) {
  check_defined(out, "out", who);
  check_defined(in, "in", who);
  check_same_dtype(out, in, who);
  check_counts(send_counts, size, "send_counts", who);
  check_counts(recv_counts, size, "recv_counts", who);
  int64_t sent = std::accumulate(send_counts.begin(), send_counts.end(), int64_t(0));
  int64_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t(0));
  H2_CHECK(sent == in.numel(), "{}: in {} must have sum(send_counts) = {} elements, has {}", who,
           in.str(), sent, in.numel());
  H2_CHECK(received == out.numel(), "{}: out {} must have sum(recv_counts) = {} elements, has {}",
           who, out.str(), received, out.numel());
  check_no_partial_overlap(out, in, who);
  for (int64_t c : send_counts) check_whole_bytes(in.dtype(), c, "a send block", who);
  for (int64_t c : recv_counts) check_whole_bytes(in.dtype(), c, "a receive block", who);
}

void check_point_to_point(const Tensor& tensor, int peer, int tag, int size, std::string_view who) {
  check_defined(tensor, "tensor", who);
  check_rank(peer, size, "peer", who);
  H2_CHECK(tag >= 0, "{}: tag {} is negative (tags are >= 0)", who, tag);
}

}  // namespace h2::comm
