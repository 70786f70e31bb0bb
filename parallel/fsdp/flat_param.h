// FlatParamGroup: one FSDP unit (the embedding, one decoder block or the head) sharded over a
// communicator group of n ranks.
//
// The unit's Params are laid end to end in Hugging Face order as one flat vector of N elements,
// padded with zeros to a multiple of n and cut into n equal shards; rank k owns shard k: an FP32
// master shard (the truth for the parameters) and an FP32 gradient shard. Two states:
// - sharded (after construction and reshard()): the Params' values are undefined, so a layer
//   that touches one fails instead of reading stale weights;
// - unsharded (after unshard()): every Param's value is a view into one full flat buffer in the
//   compute dtype, all-gathered from the masters, bit for bit what the masters round to.
// Full gradients are a flat f32 buffer too (each Param's grad a view into it): unshard()
// allocates it, zero, when absent; backward passes add into it over any number of micro-batches
// and reshard()/unshard() cycles; reduce_grad() reduce-scatters it into the gradient shard once
// and frees it. Both collectives also come in two halves (begin/finish) whose transfers move
// while the caller computes: ZeroPP's prefetched gathers and reductions behind the backward.
//
// Every rank of the group must construct its groups in the same order from identical parameters
// (a model built with one seed gives identical values for one seed); the constructor checks that
// the layouts agree. Collective calls (constructor, unshard, reduce_grad) must be made by every
// rank in the same order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"
#include "nn/param.h"
#include "nn/unit.h"

namespace h2::parallel::fsdp {

// Where one parameter lies in the flat vector.
struct FlatSlot {
  std::string name;  // Hugging Face name
  Shape shape;
  int64_t offset = 0;  // first flat element
  int64_t numel = 0;
};

class FlatParamGroup {
 public:
  // Takes over `params` (non-empty; values defined, one compute dtype of f32, bf16 or f16, one
  // device): the master shard is initialised from the values, then the Params' values and grads
  // are released (the group starts sharded). Collective over `group`.
  FlatParamGroup(comm::Communicator& group, std::vector<nn::Param*> params);
  // The Params of `unit` (Unit::collect).
  FlatParamGroup(comm::Communicator& group, nn::Unit& unit);
  FlatParamGroup(const FlatParamGroup&) = delete;
  FlatParamGroup& operator=(const FlatParamGroup&) = delete;

  // All-gathers the masters (converted to the compute dtype) and points every Param's value
  // into the full buffer; allocates zero full gradients when there are none. No communication
  // when already unsharded. Collective.
  void unshard();
  // unshard() in two halves, so that the gather moves while the caller computes (ZeroPP
  // prefetch): begin_unshard() rounds the master, copies this rank's shard into a new full buffer
  // and posts a send of it to, and a receive from, every other rank of the group (point-to-point,
  // message tag `tag`: the same on every rank, unique among the gathers in flight on the group);
  // finish_unshard() waits for them and then does what unshard() does. The same bytes as
  // unshard(). Both are no-ops when already unsharded; begin is collective.
  void begin_unshard(int tag);
  void finish_unshard();
  // Tests the gather's transfers once (progress while computing); true when all have arrived.
  bool poll_unshard();
  // Releases the full buffer: every Param's value becomes undefined. Full gradients stay. A
  // gather still in flight is finished first (its buffers must outlive the transfers).
  void reshard();
  // grad_shard = scale * (sum over ranks of the full gradients' shard) (+ grad_shard when
  // `accumulate`), then releases the full gradients. Collective. Finishes a reduction begun.
  void reduce_grad(double scale = 1.0, bool accumulate = false);
  // reduce_grad() in two halves, so that the reduction moves while the caller runs the backward
  // of the next units: begin_reduce_grad() sends every other rank its block of the full
  // gradients and posts receives for the others' blocks of this rank's shard (point-to-point,
  // tag `tag` as for begin_unshard, distinct from the gathers'); the full gradients must not
  // change until the finish. finish_reduce_grad() waits, sums the blocks in the order DiComm's
  // ring reduce-scatter sums them (ranks r + 1, r + 2, ..., r for shard r), so that the shard is
  // bit for bit reduce_grad()'s on host communicators, and then does what reduce_grad() does.
  // Begin is collective and a no-op while a reduction is in flight.
  void begin_reduce_grad(int tag);
  void finish_reduce_grad(double scale = 1.0, bool accumulate = false);
  // Tests the reduction's transfers once; true when all have arrived.
  bool poll_reduce_grad();
  // Sets the gradient shard to zero (after an optimizer step).
  void zero_grad_shard();

  bool is_unsharded() const { return full_.defined(); }
  bool unshard_in_flight() const { return gathering_.defined(); }
  bool has_full_grads() const { return full_grad_.defined(); }
  bool reduce_in_flight() const { return reducing_.defined(); }

  const std::vector<FlatSlot>& layout() const { return layout_; }
  // "model.layers.0.input_layernorm.weight (+8 more)": for messages.
  const std::string& label() const { return label_; }
  int64_t numel() const { return numel_; }  // N
  int64_t padded_numel() const { return shard_numel_ * group_size_; }
  int64_t padding() const { return padded_numel() - numel_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t shard_offset() const { return shard_numel_ * rank_; }  // first flat element owned
  DType compute_dtype() const { return dtype_; }
  Device& device() const { return *device_; }
  comm::Communicator& group() const { return *group_; }

  // (shard_numel) f32 on device(); padding elements are zero. Writable through the handle.
  const Tensor& master_shard() const { return master_; }
  const Tensor& grad_shard() const { return grad_shard_; }

 private:
  void check_layout_agrees();
  Tensor rounded_master() const;  // the master shard in the compute dtype
  void use_full(Tensor full);     // keeps the full buffer and points every Param into it
  void allocate_full_grads();
  void check_full_grads() const;  // every Param's grad still a view of full_grad_
  // Sends send_from(r) to and receives recv_into(r) from every other rank r of the group.
  template <class RecvInto, class SendFrom>
  void post_exchange(int tag, const RecvInto& recv_into, const SendFrom& send_from,
                     std::vector<std::unique_ptr<comm::Request>>& requests);
  // Where a reduction's sum goes: straight into the gradient shard when nothing scales or
  // accumulates, else a new buffer.
  Tensor reduce_target(double scale, bool accumulate) const;
  // Rank q's block of this rank's shard in a reduction in flight (q != this rank: those are
  // received in rank order; this rank's own stays in the full gradients).
  Tensor received_block(int q) const;
  // grad_shard = scale * reduced (+ grad_shard), then releases the full gradients.
  void take_reduced(const Tensor& reduced, double scale, bool accumulate);
  void release_full_grads();

  comm::Communicator* group_;
  int rank_;
  int group_size_;
  std::vector<nn::Param*> params_;
  std::vector<FlatSlot> layout_;
  std::string label_;
  DType dtype_;
  Device* device_;
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
  Tensor master_;      // (shard_numel) f32
  Tensor grad_shard_;  // (shard_numel) f32
  Tensor full_;        // (padded_numel) compute dtype; defined while unsharded
  Tensor full_grad_;   // (padded_numel) f32; defined between unshard() and reduce_grad()
  // A gather begun and not finished: the full buffer being filled, the rounded master shard it
  // sends, and the transfers.
  Tensor gathering_, gather_source_;
  std::vector<std::unique_ptr<comm::Request>> gather_requests_;
  // A reduction begun and not finished: ((n - 1) * shard_numel) f32, the other ranks' blocks of
  // this rank's shard in rank order (this rank's own skipped), and the transfers.
  Tensor reducing_;
  std::vector<std::unique_ptr<comm::Request>> reduce_requests_;
};

}  // namespace h2::parallel::fsdp
