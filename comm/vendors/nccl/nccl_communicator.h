// The Communicator for groups whose every rank drives one CUDA device: NCCL collectives and
// point-to-point transfers on the caller's stream. No vendor type appears here.
//
// Invariants and choices:
// - the communicator is non-blocking (ncclConfig_t::blocking = 0), so init, split and every wait
//   poll NCCL and give up after H2_COMM_TIMEOUT: the communicator is then aborted and CommError
//   names the rank and the operation; an aborted communicator refuses further calls;
// - collectives are enqueued on the given stream (else the tensor device's default stream) and
//   return before they complete; results are ready in stream order;
// - tensors must live on this communicator's CUDA device; non-contiguous ones are staged through
//   contiguous copies on the same stream. Reductions take f32, bf16, f16, i32, i64 and u8 (avg
//   only floating); data movement (gather, broadcast, all-to-all, send/recv) moves any dtype as
//   bytes;
// - isend/irecv are queued and start together, as one NCCL group on an internal stream, at the
//   first test()/wait() of any of them or at the next collective, barrier or split: so two ranks
//   that send to each other before receiving cannot deadlock. NCCL has no tags: transfers
//   between two ranks match in posting order, so both sides must post them in the same order.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/store.h"

namespace h2::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group of `size` ranks as `rank` on CUDA device `device`: rank 0 publishes the NCCL
  // unique id at key_prefix + "/nccl_id", the others read it (waiting up to H2_COMM_TIMEOUT).
  // Blocks until every rank joined; CommError names the rank on timeout or NCCL failure.
  static std::unique_ptr<NcclCommunicator> create(Store& store, const std::string& key_prefix,
                                                  int rank, int size, Device& device);
  // NCCL is released (finalized, waiting up to H2_COMM_TIMEOUT, else aborted) once the
  // communicator and every request it handed out are gone.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string name() const override { return "nccl"; }
  // True exactly for CUDA devices.
  bool can_connect(const Device& device) const override;

  std::unique_ptr<Communicator> split(int color, int key) override;

  void all_reduce(const Tensor& out, const Tensor& in, ReduceOp op,
                  Stream* stream = nullptr) override;
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                      Stream* stream = nullptr) override;
  void all_gather(const Tensor& out, const Tensor& in, Stream* stream = nullptr) override;
  void broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream = nullptr) override;
  void all_to_all(const Tensor& out, const Tensor& in, Stream* stream = nullptr) override;
  void all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                    std::span<const int64_t> send_counts, Stream* stream = nullptr) override;
  void barrier() override;

  std::unique_ptr<Request> isend(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Request> irecv(const Tensor& tensor, int peer, int tag) override;

  using Communicator::all_reduce;
  using Communicator::broadcast;

  // NCCL handle, streams and queued transfers; shared with the Requests it hands out, so that a
  // request outliving the communicator stays valid.
  struct State;

 private:
  explicit NcclCommunicator(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace h2::comm
