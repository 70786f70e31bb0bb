// HeteroAuto's memory model: one rank's peak device memory under a plan, counted the way the
// runtime allocates it, so that a plan the planner accepts fits its chips and one it refuses
// would not. docs/planner.md derives each term; in short, a rank's peak is
//
//   state + max over its schedule's compute actions (held activations + that action's transient)
//         + transfer buffers + the step's token ids
//
// - state: per parameter tensor (replicated) or per FSDP unit (one flat vector padded to a
//   multiple of the group) the blocks the device allocator hands out, rounded to its size classes
//   (core/size_class.h): the compute copy, the FP32 gradient, FP32 master (when the compute dtype
//   is not FP32) and AdamW's two moments; FSDP keeps the master, gradient and moments as shards
//   and the whole compute copy and gradient while the step runs;
// - held activations: walking the rank's action list, a forward adds its stage's stash per
//   micro-batch (with recomputation only each block's input), a backward removes it, ZB-H1's
//   input-gradient pass swaps it for what the deferred weight gradient keeps, which the
//   weight-gradient pass frees; the stash, deferred and transient (workspace) bytes per unit are
//   the profile's measurements (profile.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/planner/profile.h"

namespace h2::parallel::planner {

// Device bytes of one unit's parameters and optimizer state on one rank: replicated (group 1 or
// no FSDP) or sharded over `group` ranks under FSDP.
int64_t unit_state_bytes(const ModelShape& model, UnitKind kind, DType compute, int group,
                         bool fsdp);

// What one stage keeps per micro-batch and the most it holds while one of its compute actions
// runs (above what the rank held before: its other micro-batches and stages), from its units'
// profile figures at the rank's rows.
struct StageActivations {
  int64_t stash = 0;     // forward -> backward (recompute: the blocks' inputs only)
  int64_t deferred = 0;  // ZB-H1: input-gradient pass -> weight-gradient pass
  int64_t forward_peak = 0, backward_peak = 0, input_peak = 0;  // during F, B and I
};

// The stage's activations: its units' stashes and deferred weight-gradient state added, and the
// peaks walked unit by unit (a backward frees each unit's stash as it passes it, an input-gradient
// pass swaps it for the deferred state, a recomputed block first rebuilds its whole stash).
StageActivations stage_activations(const std::vector<UnitCost>& units,
                                   const std::vector<UnitKind>& kinds, bool recompute,
                                   int64_t block_input_bytes);

// The peak of held activations plus the running action's peak over a rank's action list
// (stages indexed as in `by_stage`).
int64_t peak_activation_bytes(const std::vector<pipeline::Action>& actions,
                              const std::vector<StageActivations>& by_stage);

// For the search, which prices many layer splits of one schedule: the (kind, stashed, deferred)
// micro-batch counts a rank's list passes through at its compute actions, whatever the stages'
// sizes; peak_of() evaluates them for one stage size (single-stage positions exactly).
struct HeldCounts {
  struct State {
    pipeline::ActionKind kind;
    int stashed = 0, deferred = 0;  // other micro-batches held when the action starts
    auto operator<=>(const State&) const = default;
  };
  std::vector<State> states;
  static HeldCounts of(const std::vector<pipeline::Action>& actions);
  int64_t peak_of(const StageActivations& stage) const;
};

// The share of a chip's memory a plan may fill: the memory model is validated within 5% of the
// allocator's measured peak (docs/planner.md), so a plan fits when its predicted peak leaves
// that much of the chip free, and no accepted plan runs out.
inline constexpr double kMemoryHeadroom = 0.05;
inline int64_t usable_bytes(int64_t capacity) {
  return int64_t(double(capacity) * (1.0 - kMemoryHeadroom));
}

// Transfer buffers: the activation received and the one sent, in the compute dtype, and the
// wire copy of the one in flight when the wire dtype differs (positions with a neighbour only).
int64_t transfer_bytes(const ModelShape& model, int64_t rows, DType compute,
                       std::optional<DType> wire, bool has_neighbour);

// The token ids and targets of every micro-batch of the step, uploaded at its start.
int64_t token_bytes(const ModelShape& model, int64_t micro_batch_rows, int micro_batches);

}  // namespace h2::parallel::planner
