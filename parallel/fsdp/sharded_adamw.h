// ShardedAdamW: AdamW on the local FP32 shards of FSDP units (ZeRO-3 style).
//
// Each rank updates only the master shard it owns, with FP32 first and second moments of the
// same size, using the gradient shard that FlatParamGroup::reduce_grad() left. The arithmetic is
// optim::AdamW's, element for element (the same adamw op on the slices of each parameter that
// fall into the shard), with the same weight-decay rule: matrices (rank >= 2) decay, vectors
// (norm gains) do not. Padding elements are never touched, so masters, moments and gradients
// stay zero there. Gathered, the masters after a step equal the unsharded AdamW's on the same
// summed gradients up to the rounding of the gradient norm.
//
// The global gradient norm sums each rank's squared shard norms over a communicator. Over the
// FSDP group (grad_norm()) that is the norm of the group's units; with pipeline stages pass a
// communicator spanning every stage (grad_norm(over)): its ranks must hold disjoint shards.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "optim/adamw.h"
#include "parallel/fsdp/flat_param.h"

namespace h2::parallel::fsdp {

class ShardedAdamW {
 public:
  // `units` stay owned by the caller and must outlive the optimizer; all share one group.
  ShardedAdamW(std::vector<FlatParamGroup*> units, optim::AdamwOptions options);

  // This rank's sum of squared gradient-shard elements (in double across units).
  double local_grad_sum_squares() const;
  // sqrt of the sum of local_grad_sum_squares() over the ranks of `over`, added in rank order
  // as doubles, so every rank gets the same bits. Collective over `over`.
  double grad_norm(comm::Communicator& over) const;
  // Over the units' FSDP group.
  double grad_norm() const;

  // One update at rate `lr` of every unit's master shard; gradients are multiplied by
  // `grad_scale` first (optim::clip_scale for clipping). Every unit must be resharded: an
  // unsharded unit's full parameters would go stale. Local: no communication.
  void step(double lr, double grad_scale = 1.0);
  // Zeroes every unit's gradient shard.
  void zero_grad();

  int64_t steps_taken() const { return step_; }
  void restore_steps(int64_t steps) { step_ = steps; }

  // Per unit, the moments of its shard: (shard_numel) f32, zero on padding. For checkpoints.
  struct ShardState {
    Tensor m, v;
  };
  const std::vector<ShardState>& state() const { return state_; }
  const std::vector<FlatParamGroup*>& units() const { return units_; }

 private:
  // A run of one parameter's elements inside one unit's shard: [begin, end) in shard offsets.
  struct Segment {
    size_t unit;
    int64_t begin, end;
    bool decay;
  };

  std::vector<FlatParamGroup*> units_;
  std::vector<ShardState> state_;
  std::vector<Segment> segments_;
  optim::AdamwOptions options_;
  int64_t step_ = 0;
};

}  // namespace h2::parallel::fsdp
