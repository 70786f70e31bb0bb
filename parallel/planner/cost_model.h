// HeteroAuto's cost model: the step time of a plan and every rank's peak memory, from the chips'
// profiles (profile.h) and the cluster's links (core/cluster.h), by replaying the plan's lowered
// schedule in the pipeline simulator rather than by a closed formula. docs/planner.md derives
// every term; in short, for a plan on a cluster:
//
//   step = upload + makespan(simulated schedule) + max over ranks (exposed replica reduction
//          + optimizer)
//
// where the simulated durations of stage s (on group q of g_q chips of type t_q, r_q = rows/g_q
// rows per rank) are the profiled unit costs of its units at r_q rows (recompute adds the
// blocks' forward to the backward), a transfer between stages flies over the link of their chip
// types (latency + bytes / bandwidth, bytes of the wire dtype) and costs each side a staging copy
// over the chip's host link, FSDP gathers and gradient reductions are rings over the group's
// link, and the replicas' gradient all-reduce overlaps the last backward. Memory per rank:
// memory_model.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/plan.h"
#include "parallel/planner/profile.h"

namespace h2::parallel::planner {

// Profiles by chip type name.
struct Profiles {
  std::map<std::string, ChipProfile> by_chip;
  // ConfigError naming the chip and `h2 profile` when there is none.
  const ChipProfile& of(const std::string& chip) const;
};

struct CostInputs {
  const Cluster* cluster = nullptr;  // rank r of a plan is the cluster's chip r
  ModelShape model;
  DType dtype = DType::f32;  // compute dtype
  const Profiles* profiles = nullptr;
};

struct PositionEstimate {
  std::string chip;  // type of the group's chips
  int ranks = 1;
  double busy_s = 0;           // compute per step on one rank of the group
  int64_t peak_bytes = 0;      // predicted peak device memory of one rank of the group
  int64_t capacity_bytes = 0;  // the chip's memory
};

struct PlanEstimate {
  double step_s = 0;
  double upload_s = 0;    // every rank uploads the step's token ids before the pipeline runs
  double pipeline_s = 0;  // the simulated schedule's makespan
  double tail_s = 0;      // after it: exposed replica reduction and optimizer (worst rank)
  double bubble = 0;      // idle share of the pipeline part (simulator)
  double comm_s = 0;      // transfer and collective time on the busiest rank
  std::vector<PositionEstimate> positions;
  pipeline::SimulationResult simulation;

  bool fits() const;  // every rank's peak within its chip's usable memory (memory_model.h)
  double tokens_per_s(const Plan& plan, const ModelShape& model) const;
  // The first position that does not fit, as "group 0 (chip-a): 2.1 GiB of 2.0 GiB"; empty if all.
  std::string memory_problem() const;
};

// One stage's costs on one rank of its group, before any replay: what the cost model's
// durations are made of, kept apart so that the cluster simulator (parallel/sim/plan_step.h) can
// move the bytes as flows and split the work per unit where the runtime overlaps it.
struct StageCosts {
  int position = 0;
  double params = 0;          // parameters the stage holds
  double gather_bytes = 0;    // FSDP: the stage's compute copy, which UNSHARD gathers
  double gradient_bytes = 0;  // its FP32 gradients, which REDUCE_GRAD reduces
  // Host staging around those collectives on one rank (the shard in and the whole out, or for a
  // replicated group's all-reduce the gradients both ways).
  double gather_staging_s = 0, reduce_staging_s = 0;
  // Per unit in compute order: its forward, and what the stage's last backward action (B, or W
  // where the backward is split) runs of it.
  std::vector<double> unit_forward_s, unit_last_backward_s;
  std::vector<double> unit_params;
  // FSDP: each unit's share of the staging above (its gather's, its reduction's).
  std::vector<double> unit_gather_staging_s, unit_reduce_staging_s;
};

// One schedule position's costs per rank of its group.
struct PositionCosts {
  double optimizer_s = 0;
  double upload_s = 0;  // the step's token ids to the chip
  // Bytes this rank all-reduces over the replicas (its FP32 gradients or their FSDP shard), the
  // link of that ring, and its host staging.
  double replica_bytes = 0;
  LinkSpec replica_link;
  double replica_staging_s = 0;
  int64_t peak_bytes = 0;  // memory_model.h
};

struct PlanCosts {
  // The cost model's durations per stage for one rank of its group: computes, staging copies,
  // flights of latency + bytes / bandwidth, and the group collectives as the costed waits
  // (rings, the prefetched gather's delay, the reduction's wait behind the backward).
  pipeline::Durations durations;
  std::vector<StageCosts> stages;
  std::vector<PositionCosts> positions;
  double micro_batch_wire_bytes = 0;  // a whole micro-batch's activation on the wire
};

// `lowered`: plan.lowered_schedule().
PlanCosts plan_costs(const Plan& plan, const CostInputs& in, const pipeline::Schedule& lowered);

// A ring over g ranks moving `bytes` in total, `passes` times (all-gather or reduce-scatter: 1;
// all-reduce: 2): (g - 1) steps of bytes / g each per pass.
double ring_s(double bytes, int g, const LinkSpec& link, int passes);

// `lowered`, when given, is plan.lowered_schedule() computed once for many plans of one shape
// (schedule, positions, micro-batches, chunks, FSDP): the search's cache.
PlanEstimate estimate(const Plan& plan, const CostInputs& in,
                      const pipeline::Schedule* lowered = nullptr);

// The cluster chip (an index of the cluster's chips, core/cluster.h) job rank `rank` of `plan`
// drives: plans on a cluster name each rank's device "vchip:K".
int chip_of_rank(const Plan& plan, int rank);

// The unit kind of model unit `unit` (0 the embedding, 1 .. L the blocks, L + 1 the head).
UnitKind unit_kind(const ModelShape& model, int unit);

}  // namespace h2::parallel::planner
