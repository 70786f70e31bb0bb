// Argument checks every Communicator implementation runs before moving a byte, so that the NCCL,
// host and hierarchical communicators reject the same calls with the same messages. They check
// one rank's arguments only (defined tensors, equal dtypes, element-count relations, ranks in
// range, no partial overlap); agreement across ranks is the transport's business. Failures throw
// h2::Error (UnsupportedError for an operator the dtype has no meaning for) naming the collective
// (`who`, e.g. "nccl all_reduce"), the tensors' str() and the relation that was expected.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace h2::comm {

// Whether `op` can be applied to `dtype`: avg only on floating dtypes, sum/max/min on all but
// f4e2m1 (two elements share a byte, so no transport reduces it). Data-movement collectives take
// f4e2m1 when every block is a whole number of bytes (an even element count).
bool reduce_op_valid(ReduceOp op, DType dtype);

// Whether `a` and `b` are the same view (same bytes, dtype, shape and strides): the in-place case.
bool same_view(const Tensor& a, const Tensor& b);

// out.numel() == in.numel(); reduce_op_valid(op, dtype).
void check_all_reduce(const Tensor& out, const Tensor& in, ReduceOp op, std::string_view who);
// in.numel() == size * out.numel(); reduce_op_valid(op, dtype). In place: out is block `rank`
// of in (NCCL's convention).
void check_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, int rank, int size,
                          std::string_view who);
// out.numel() == size * in.numel(). In place: in is block `rank` of out.
void check_all_gather(const Tensor& out, const Tensor& in, int rank, int size,
                      std::string_view who);
// 0 <= root < size; `in` is needed on the root only (elsewhere it may be undefined) and, where
// defined, has out's dtype and element count.
void check_broadcast(const Tensor& out, const Tensor& in, int root, int rank, int size,
                     std::string_view who);
// out.numel() == in.numel(), a multiple of size.
void check_all_to_all(const Tensor& out, const Tensor& in, int size, std::string_view who);
// size counts each, none negative; sum(send_counts) == in.numel(),
// sum(recv_counts) == out.numel().
void check_all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                        std::span<const int64_t> send_counts, int size, std::string_view who);
// A defined tensor, 0 <= peer < size, tag >= 0.
void check_point_to_point(const Tensor& tensor, int peer, int tag, int size, std::string_view who);
// 0 <= root < size (also for callers that check a root without tensors).
void check_rank(int peer, int size, std::string_view role, std::string_view who);

}  // namespace h2::comm
