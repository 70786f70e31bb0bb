// Lowering passes: turn a compute-only schedule (generators.h) into one a runtime can execute, by
// inserting point-to-point transfers, FSDP gathers and frees, and gradient reductions. Each pass
// returns a new schedule and keeps the existing actions in their order. The usual order, as in
// PyTorch's pipelining: add_unshard_reshard, add_reduce_grad, add_send_recv (lower() does all).
#pragma once

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

// Every F of a stage s whose next stage is on another rank is followed by SEND_F s -> s+1, and
// the F of s+1 is preceded by RECV_F s+1 <- s; every B (or I) of s whose previous stage is remote
// is followed by SEND_B s -> s-1 and the backward of s-1 preceded by RECV_B s-1 <- s. Receives sit
// right before the compute that consumes them, sends right after the compute that produces them,
// so the lowered schedule deadlocks exactly when the compute-only one does. Throws if the
// schedule already has transfers.
Schedule add_send_recv(const Schedule& schedule);

struct UnshardOptions {
  // At most this many stages unsharded at once on a rank; 0: no bound. Needs to be >= 1 to
  // allow any compute; when a stage must be gathered and the bound is reached, the unsharded
  // stage whose next use is furthest away is resharded first.
  int max_active_stages = 0;
  // ZeroPP gather group: with G > 0 a stage's unsharded period ends after its last compute of a
  // group of G micro-batches (micro-batch / G) in one direction (forward: F; backward: B, I,
  // W), unless the stage's next compute follows right away; more micro-batches per group, fewer
  // gathers, longer-held parameters. 0: one period per step (gather before the first compute,
  // free after the last) unless max_active_stages evicts the stage.
  int group_size = 0;
};

// FSDP: UNSHARD s right before the first compute of each unsharded period of stage s, RESHARD s
// right after the period's last compute. Throws if the schedule already has UNSHARD/RESHARD.
Schedule add_unshard_reshard(const Schedule& schedule, const UnshardOptions& options = {});

// REDUCE_GRAD s right after stage s's last backward (B or W; I when the schedule has no W for
// that stage). Throws if the schedule already has REDUCE_GRAD.
Schedule add_reduce_grad(const Schedule& schedule);

struct LoweringOptions {
  bool fsdp = false;  // add UNSHARD / RESHARD
  UnshardOptions unshard;
  bool reduce_grad = true;
  bool send_recv = true;
};

// The passes above in PyTorch's order.
Schedule lower(const Schedule& schedule, const LoweringOptions& options = {});

}  // namespace h2::parallel::pipeline
