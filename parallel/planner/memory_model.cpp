// HeteroAuto's memory model (see memory_model.h).
#include "parallel/planner/memory_model.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/size_class.h"

namespace h2::parallel::planner {
namespace {

// The device allocators' block for a request (backends/cpu/caching_allocator.cpp: 64-byte
// quantum below 4 KiB, then four classes per power of two).
int64_t block(int64_t bytes) {
  return bytes <= 0 ? 0 : int64_t(allocation_size_class(size_t(bytes), 64));
}

// Element counts of a unit's parameter tensors, in the model's order.
std::vector<int64_t> unit_tensors(const ModelShape& m, UnitKind kind) {
  const int64_t kv = m.dim / m.n_heads * m.n_kv_heads;
  switch (kind) {
    case UnitKind::embedding:
      return {m.vocab_size * m.dim};
    case UnitKind::block:
      return {m.dim, m.dim * m.dim,     m.dim * kv,        m.dim * kv,       m.dim * m.dim,
              m.dim, m.ffn_dim * m.dim, m.ffn_dim * m.dim, m.dim * m.ffn_dim};
    case UnitKind::head:
      if (m.tie_embeddings) return {m.dim};
      return {m.dim, m.vocab_size * m.dim};
  }
  return {};
}

}  // namespace

int64_t unit_state_bytes(const ModelShape& m, UnitKind kind, DType compute, int group, bool fsdp) {
  H2_CHECK(group >= 1, "a group of {} ranks", group);
  const int64_t compute_bytes = int64_t(dtype_storage_bytes(compute, 1));
  const std::vector<int64_t> tensors = unit_tensors(m, kind);
  if (fsdp) {  // one flat vector, padded to a multiple of the group
    int64_t n = 0;
    for (int64_t t : tensors) n += t;
    const int64_t shard = (n + group - 1) / group;
    const int64_t padded = shard * group;
    return 4 * block(4 * shard) + block(compute_bytes * padded) + block(4 * padded);
  }
  int64_t bytes = 0;
  for (int64_t n : tensors) {
    bytes += block(compute_bytes * n) + 3 * block(4 * n);  // value, gradient, AdamW moments
    if (compute != DType::f32) bytes += block(4 * n);      // the FP32 master
  }
  return bytes;
}

StageActivations stage_activations(const std::vector<UnitCost>& units,
                                   const std::vector<UnitKind>& kinds, bool recompute,
                                   int64_t block_input_bytes) {
  H2_CHECK(units.size() == kinds.size(), "{} unit costs for {} units", units.size(), kinds.size());
  StageActivations a;
  auto kept = [&](size_t i) {  // what unit i holds from its forward to its backward
    return recompute && kinds[i] == UnitKind::block ? block_input_bytes : units[i].stash_bytes;
  };
  for (size_t i = 0; i < units.size(); ++i) {  // forward, first unit first
    a.forward_peak =
        std::max(a.forward_peak, a.stash + units[i].stash_bytes + units[i].forward_workspace_bytes);
    a.stash += kept(i);
    a.deferred += units[i].deferred_bytes;
  }
  // Backward, last unit first: each unit's peak on top of what the stage still holds.
  auto walk = [&](bool split) {
    int64_t held = a.stash, peak = 0;
    for (size_t i = units.size(); i-- > 0;) {
      const int64_t rebuilt = kept(i) == units[i].stash_bytes ? 0 : units[i].stash_bytes;
      peak = std::max(peak, held + rebuilt + units[i].workspace_bytes);
      held += (split ? units[i].deferred_bytes : 0) - kept(i);
    }
    return peak;
  };
  a.backward_peak = walk(false);
  a.input_peak = walk(true);
  return a;
}

int64_t peak_activation_bytes(const std::vector<pipeline::Action>& actions,
                              const std::vector<StageActivations>& by_stage) {
  using pipeline::ActionKind;
  int64_t held = 0, peak = 0;  // held: every micro-batch's stash and deferred state on the rank
  for (const pipeline::Action& a : actions) {
    if (!pipeline::is_compute(a.kind)) continue;
    const StageActivations& s = by_stage.at(size_t(a.stage));
    switch (a.kind) {
      case ActionKind::F:
        peak = std::max(peak, held + s.forward_peak);
        held += s.stash;
        break;
      case ActionKind::B:
        held -= s.stash;
        peak = std::max(peak, held + s.backward_peak);
        break;
      case ActionKind::I:
        held -= s.stash;
        peak = std::max(peak, held + s.input_peak);
        held += s.deferred;
        break;
      case ActionKind::W:
        held -= s.deferred;
        break;
      default:
        break;
    }
  }
  return peak;
}

HeldCounts HeldCounts::of(const std::vector<pipeline::Action>& actions) {
  using pipeline::ActionKind;
  std::set<State> seen;
  int stashed = 0, deferred = 0;
  for (const pipeline::Action& a : actions) {
    switch (a.kind) {
      case ActionKind::F:
        seen.insert({a.kind, stashed++, deferred});
        break;
      case ActionKind::B:
        seen.insert({a.kind, --stashed, deferred});
        break;
      case ActionKind::I:
        seen.insert({a.kind, --stashed, deferred++});
        break;
      case ActionKind::W:
        --deferred;
        break;
      default:
        break;
    }
  }
  return {std::vector<State>(seen.begin(), seen.end())};
}

int64_t HeldCounts::peak_of(const StageActivations& stage) const {
  int64_t peak = 0;
  for (const State& s : states) {
    const int64_t running = s.kind == pipeline::ActionKind::F   ? stage.forward_peak
                            : s.kind == pipeline::ActionKind::I ? stage.input_peak
                                                                : stage.backward_peak;
    peak = std::max(peak, s.stashed * stage.stash + s.deferred * stage.deferred + running);
  }
  return peak;
}

int64_t transfer_bytes(const ModelShape& m, int64_t rows, DType compute, std::optional<DType> wire,
                       bool has_neighbour) {
  if (!has_neighbour) return 0;
  int64_t bytes = 2 * block(rows * m.activation_bytes_per_row(compute));
  if (wire && *wire != compute) bytes += block(rows * m.activation_bytes_per_row(*wire));
  return bytes;
}

int64_t token_bytes(const ModelShape& m, int64_t micro_batch_rows, int micro_batches) {
  return int64_t(micro_batches) * 2 * block(4 * micro_batch_rows * m.seq_len);
}

}  // namespace h2::parallel::planner
