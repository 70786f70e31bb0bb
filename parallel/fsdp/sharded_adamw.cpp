// ShardedAdamW: AdamW on FSDP shards, segment by segment (see sharded_adamw.h).
#include "parallel/fsdp/sharded_adamw.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "core/runtime.h"
#include "core/tensor_host.h"
#include "parallel/exact_gather.h"

namespace h2::parallel::fsdp {
namespace {

// optim::AdamW's rule (optim/adamw.cpp): matrices decay, vectors (norm gains) do not.
bool decays(const Shape& shape) {
  return shape.rank() >= 2;
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<FlatParamGroup*> units, optim::AdamwOptions options)
    : units_(std::move(units)), options_(options) {
  H2_CHECK(!units_.empty(), "ShardedAdamW: no units to optimize");
  for (size_t u = 0; u < units_.size(); ++u) {
    const FlatParamGroup* unit = units_[u];
    H2_CHECK(unit != nullptr, "ShardedAdamW: unit {} is null", u);
    H2_CHECK(&unit->group() == &units_.front()->group(),
             "ShardedAdamW: unit '{}' is sharded over another communicator than unit '{}'",
             unit->label(), units_.front()->label());
    const int64_t n = unit->shard_numel();
    state_.push_back({Tensor::zeros({n}, DType::f32, unit->device()),
                      Tensor::zeros({n}, DType::f32, unit->device())});
    const int64_t lo = unit->shard_offset(), hi = lo + n;
    for (const FlatSlot& s : unit->layout()) {
      const int64_t a = std::max(lo, s.offset), b = std::min(hi, s.offset + s.numel);
      if (a < b) segments_.push_back({u, a - lo, b - lo, decays(s.shape)});
    }
  }
}

double ShardedAdamW::local_grad_sum_squares() const {
  double total = 0;
  for (const FlatParamGroup* unit : units_) {
    Tensor sq = Tensor::empty({1}, DType::f32, unit->device());
    ops::sum_squares({.out = sq, .in = unit->grad_shard()});
    total += double(tensor_to_floats(sq)[0]);
  }
  return total;
}

double ShardedAdamW::grad_norm(comm::Communicator& over) const {
  // Added in rank order as doubles (no f64 reduction in DiComm), so every rank gets the same bits.
  Device& host = units_.front()->device().runtime().cpu();
  double total = 0;
  for (const std::vector<double>& sums : gather_doubles(over, host, {local_grad_sum_squares()}))
    total += sums[0];
  return std::sqrt(total);
}

double ShardedAdamW::grad_norm() const {
  return grad_norm(units_.front()->group());
}

void ShardedAdamW::step(double lr, double grad_scale) {
  for (const FlatParamGroup* unit : units_)
    H2_CHECK(!unit->is_unsharded(),
             "ShardedAdamW: unit '{}' is unsharded; reshard() it before step() (its full "
             "parameters would keep the old values)",
             unit->label());
  ++step_;
  for (const Segment& seg : segments_) {
    const FlatParamGroup& unit = *units_[seg.unit];
    const ShardState& st = state_[seg.unit];
    ops::adamw({.param = unit.master_shard().slice(0, seg.begin, seg.end),
                .m = st.m.slice(0, seg.begin, seg.end),
                .v = st.v.slice(0, seg.begin, seg.end),
                .grad = unit.grad_shard().slice(0, seg.begin, seg.end),
                .lr = float(lr),
                .beta1 = float(options_.beta1),
                .beta2 = float(options_.beta2),
                .eps = float(options_.eps),
                .weight_decay = seg.decay ? float(options_.weight_decay) : 0.0f,
                .grad_scale = float(grad_scale),
                .step = step_});
  }
}

void ShardedAdamW::zero_grad() {
  for (FlatParamGroup* unit : units_) unit->zero_grad_shard();
}

}  // namespace h2::parallel::fsdp
