// Communicator: the only communication type parallel/ sees. Collectives and tagged point-to-point
// transfers on tensors of any device; no vendor type in the interface. Implementations: a host
// communicator over a byte transport (UCX), NCCL for all-CUDA groups, and a hierarchical one for
// groups of mixed chips.
//
// Contract shared by every collective:
// - every rank of the communicator calls it, in the same order, with the same dtype, op and
//   counts (a mismatch is detected and raised as CommError on the ranks that see it);
// - `out` and `in` may be the same tensor (in place); otherwise they must not overlap;
// - tensors may be non-contiguous and may live on any device: the communicator stages them when
//   its transport cannot reach their memory (can_connect);
// - work is ordered after what was enqueued on `stream` (the tensor device's default stream when
//   null); host transports finish before returning, device transports (NCCL) may return early
//   and the result is then ready in stream order;
// - a peer that dies or never arrives raises CommError naming the rank and the operation within
//   H2_COMM_TIMEOUT seconds; it never hangs.
// A communicator is used by one thread at a time; different communicators may be used from
// different threads concurrently.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/tensor.h"

namespace h2::comm {

enum class ReduceOp { sum, max, min, avg };
std::string_view reduce_op_name(ReduceOp op);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// A non-blocking point-to-point transfer in flight. Destroying an unfinished request waits for it.
class Request {
 public:
  virtual ~Request() = default;
  // Whether it finished; makes progress. Throws CommError when it failed.
  virtual bool test() = 0;
  // Blocks until done or the timeout (CommError naming the peer, the tag and the operation).
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "ucx", "nccl", "hierarchical(nccl+ucx)": for logs and benchmark tables.
  virtual std::string name() const = 0;
  // Whether this communicator moves `device`'s memory directly (else it stages through host).
  virtual bool can_connect(const Device& device) const = 0;
  // Emulated links (an emulated cluster's paced transfers, this process's): how often a transfer
  // arrived later than its link allowed (core/device.h). Zero where links are real.
  virtual PacingStats link_pacing() const { return {}; }
  // Moves the transfers in flight once (a progress helper's poll: it completes no Request and
  // touches no tensor). Like every call, only while no other thread calls this communicator.
  virtual void progress() {}

  // Ranks passing the same `color` form one new communicator, ranked by (key, old rank). Every
  // rank calls it; a negative colour joins none and gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // out[i] = op over ranks of in[i]. avg is for floating dtypes only.
  virtual void all_reduce(const Tensor& out, const Tensor& in, ReduceOp op,
                          Stream* stream = nullptr) = 0;
  // in has size() * out.numel() elements; rank r gets the reduction of block r.
  virtual void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                              Stream* stream = nullptr) = 0;
  // out has size() * in.numel() elements; block r is rank r's `in`.
  virtual void all_gather(const Tensor& out, const Tensor& in, Stream* stream = nullptr) = 0;
  // out = root's in, on every rank (in is read on the root only).
  virtual void broadcast(const Tensor& out, const Tensor& in, int root,
                         Stream* stream = nullptr) = 0;
  // Equal blocks: in and out have size() blocks of numel()/size() elements; block j of rank i's
  // in becomes block i of rank j's out.
  virtual void all_to_all(const Tensor& out, const Tensor& in, Stream* stream = nullptr) = 0;
  // Uneven blocks: send_counts[j] elements (consecutive, in rank order) go to rank j and
  // recv_counts[i] elements arrive from rank i. send_counts[j] on rank i must equal
  // recv_counts[i] on rank j.
  virtual void all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts,
                            const Tensor& in, std::span<const int64_t> send_counts,
                            Stream* stream = nullptr) = 0;
  // Returns when every rank has entered it.
  virtual void barrier() = 0;

  // Tagged point-to-point. A send matches the recv on `peer` with the same tag (tag >= 0);
  // transfers with equal (peer, tag) match in order. Many may be in flight; `tensor` must stay
  // alive and unchanged (send) or untouched (recv) until the request finished.
  virtual std::unique_ptr<Request> isend(const Tensor& tensor, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(const Tensor& tensor, int peer, int tag) = 0;
  void send(const Tensor& tensor, int peer, int tag) { isend(tensor, peer, tag)->wait(); }
  void recv(const Tensor& tensor, int peer, int tag) { irecv(tensor, peer, tag)->wait(); }

  // In-place conveniences.
  void all_reduce(const Tensor& tensor, ReduceOp op) { all_reduce(tensor, tensor, op); }
  void broadcast(const Tensor& tensor, int root) { broadcast(tensor, tensor, root); }
};

}  // namespace h2::comm
