// Two-level all-reduce and delegation to the flat communicator.
#include "comm/world/hierarchical_communicator.h"

#include <fmt/format.h>

#include "comm/collective_checks.h"
#include "core/ops.h"

namespace h2::comm {

HierarchicalCommunicator::HierarchicalCommunicator(std::unique_ptr<Communicator> flat,
                                                   std::unique_ptr<Communicator> local,
                                                   std::unique_ptr<Communicator> leaders)
    : flat_(std::move(flat)), local_(std::move(local)), leaders_(std::move(leaders)) {}

std::string HierarchicalCommunicator::name() const {
  return fmt::format("hierarchical({} inside a chip type, {} between)", local_->name(),
                     flat_->name());
}

std::unique_ptr<Communicator> HierarchicalCommunicator::split(int color, int key) {
  // A split group may be all one chip type or mixed; the flat transport serves both.
  return flat_->split(color, key);
}

void HierarchicalCommunicator::all_reduce(const Tensor& out, const Tensor& in, ReduceOp op,
                                          Stream* stream) {
  check_all_reduce(out, in, op, "hierarchical all_reduce");
  // avg is a sum over the whole group divided once at the end: the local groups differ in size.
  const ReduceOp combine = op == ReduceOp::avg ? ReduceOp::sum : op;
  local_->all_reduce(out, in, combine, stream);
  if (leaders_) leaders_->all_reduce(out, out, combine, stream);
  local_->broadcast(out, out, 0, stream);
  if (op == ReduceOp::avg) {
    AddArgs scale;
    scale.out = out;
    scale.a = out;
    scale.alpha = 1.0f / float(size());
    ops::add(scale, stream);
  }
}

void HierarchicalCommunicator::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                              Stream* stream) {
  flat_->reduce_scatter(out, in, op, stream);
}

void HierarchicalCommunicator::all_gather(const Tensor& out, const Tensor& in, Stream* stream) {
  flat_->all_gather(out, in, stream);
}

void HierarchicalCommunicator::broadcast(const Tensor& out, const Tensor& in, int root,
                                         Stream* stream) {
  flat_->broadcast(out, in, root, stream);
}

void HierarchicalCommunicator::all_to_all(const Tensor& out, const Tensor& in, Stream* stream) {
  flat_->all_to_all(out, in, stream);
}

void HierarchicalCommunicator::all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts,
                                            const Tensor& in, std::span<const int64_t> send_counts,
                                            Stream* stream) {
  flat_->all_to_all_v(out, recv_counts, in, send_counts, stream);
}

std::unique_ptr<Request> HierarchicalCommunicator::isend(const Tensor& tensor, int peer, int tag) {
  return flat_->isend(tensor, peer, tag);
}

std::unique_ptr<Request> HierarchicalCommunicator::irecv(const Tensor& tensor, int peer, int tag) {
  return flat_->irecv(tensor, peer, tag);
}

}  // namespace h2::comm
