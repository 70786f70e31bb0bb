// HierarchicalCommunicator: a group of mixed chips. Ranks driving the same chip type form a local
// group that uses its vendor's library (NCCL for CUDA, the host communicator otherwise); one leader
// per chip type (local rank 0) joins a leaders' group over UCX. All-reduce is the one collective
// whose traffic this shape cuts: a local reduction, an exchange among leaders only, a local
// broadcast. Every other call goes through the flat communicator of the whole group, which stages
// device memory through host.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace h2::comm {

class HierarchicalCommunicator final : public Communicator {
 public:
  // `leaders` is null on ranks that are not their local group's rank 0.
  HierarchicalCommunicator(std::unique_ptr<Communicator> flat, std::unique_ptr<Communicator> local,
                           std::unique_ptr<Communicator> leaders);

  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }
  std::string name() const override;
  bool can_connect(const Device& device) const override { return local_->can_connect(device); }
  PacingStats link_pacing() const override { return flat_->link_pacing(); }
  void progress() override { flat_->progress(); }  // point-to-point goes through flat_
  std::unique_ptr<Communicator> split(int color, int key) override;

  void all_reduce(const Tensor& out, const Tensor& in, ReduceOp op, Stream* stream) override;
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, Stream* stream) override;
  void all_gather(const Tensor& out, const Tensor& in, Stream* stream) override;
  void broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream) override;
  void all_to_all(const Tensor& out, const Tensor& in, Stream* stream) override;
  void all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                    std::span<const int64_t> send_counts, Stream* stream) override;
  void barrier() override { flat_->barrier(); }
  std::unique_ptr<Request> isend(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Request> irecv(const Tensor& tensor, int peer, int tag) override;

  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  std::unique_ptr<Communicator> flat_;
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> leaders_;
};

}  // namespace h2::comm
