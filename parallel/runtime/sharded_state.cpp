// ModelState of FSDP units: AdamW on this rank's shards (see model_state.h).
#include <cmath>

#include "core/error.h"
#include "parallel/exact_gather.h"
#include "parallel/fsdp/sharded_adamw.h"
#include "parallel/runtime/model_state.h"

namespace h2::parallel {
namespace {

class ShardedState final : public ModelState {
 public:
  ShardedState(std::vector<fsdp::FlatParamGroup*> units, optim::AdamwOptions options,
               StateOwnership ownership)
      : adamw_(std::move(units), options), own_(std::move(ownership)) {}

  void zero_grad() override { adamw_.zero_grad(); }

  // Replica 0's shards are disjoint and cover every parameter: their squared norms added in rank
  // order (the other replicas hold the same gradients and add zeros).
  double grad_norm() override {
    const double mine = own_.replica == 0 ? adamw_.local_grad_sum_squares() : 0.0;
    double total = 0;
    for (const std::vector<double>& sums : gather_doubles(*own_.job, *own_.host, {mine}))
      total += sums[0];
    return std::sqrt(total);
  }

  void step(double lr, double grad_scale) override { adamw_.step(lr, grad_scale); }

  // Each unit's masters and moments gathered over its group into whole tensors in host memory;
  // the group's rank 0 writes them (its replica's share of the rows). One unit's tensor at a time
  // passes through one device buffer of the unit's padded size, so that saving needs no more
  // device memory than the step did (which held the unit's whole FP32 gradient), however large
  // the stage: the state stays sharded on the device.
  std::vector<StatePiece> pieces() override {
    std::vector<StatePiece> out;
    const auto& units = adamw_.units();
    for (size_t i = 0; i < units.size(); ++i) {
      fsdp::FlatParamGroup& f = *units[i];
      const bool writer = f.group().rank() == 0;
      // The other ranks take part in the gathers but write nothing: their pieces only give the
      // shapes, viewed in one host buffer that is never read.
      const Tensor unread =
          writer ? Tensor() : Tensor::empty({f.padded_numel()}, DType::f32, *own_.host);
      auto gather = [&](const Tensor& shard) {
        Tensor full = Tensor::empty({f.padded_numel()}, DType::f32, f.device());
        f.group().all_gather(full, shard);
        return writer ? full.to(*own_.host) : unread;
      };
      const Tensor master = gather(f.master_shard()), m = gather(adamw_.state()[i].m),
                   v = gather(adamw_.state()[i].v);
      for (const fsdp::FlatSlot& slot : f.layout()) {
        auto piece = [&](const Tensor& full) {
          return full.slice(0, slot.offset, slot.offset + slot.numel).view(slot.shape);
        };
        out.push_back({slot.name, piece(master), piece(m), piece(v), writer ? own_.replica : 0,
                       writer ? own_.replicas : 0});
      }
    }
    return out;
  }

  // Each unit's whole tensors laid out flat on the host, this rank's shard taken.
  void load(StateReader& reader, int64_t steps) override {
    const bool moments = reader.has_moments();
    const auto& units = adamw_.units();
    for (size_t i = 0; i < units.size(); ++i) {
      fsdp::FlatParamGroup& f = *units[i];
      auto load = [&](Tensor shard, StateKind kind) {
        Tensor full = Tensor::zeros({f.padded_numel()}, DType::f32, *own_.host);
        for (const fsdp::FlatSlot& slot : f.layout()) {
          Tensor piece = full.slice(0, slot.offset, slot.offset + slot.numel).view(slot.shape);
          reader.read(kind, slot.name, piece);
        }
        shard.copy_from(full.slice(0, f.shard_offset(), f.shard_offset() + f.shard_numel()));
      };
      load(f.master_shard(), StateKind::master);
      if (!moments) continue;
      load(adamw_.state()[i].m, StateKind::m);
      load(adamw_.state()[i].v, StateKind::v);
    }
    adamw_.restore_steps(steps);
  }

 private:
  fsdp::ShardedAdamW adamw_;
  StateOwnership own_;
};

}  // namespace

std::unique_ptr<ModelState> ModelState::sharded(std::vector<fsdp::FlatParamGroup*> units,
                                                optim::AdamwOptions options,
                                                StateOwnership ownership) {
  H2_CHECK(ownership.job != nullptr && ownership.host != nullptr, "sharded state without a job");
  return std::make_unique<ShardedState>(std::move(units), options, std::move(ownership));
}

}  // namespace h2::parallel
