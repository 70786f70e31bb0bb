// A plan's training step on a cluster, simulated: the cluster simulator's front.
//
// The cost model's pieces (planner::plan_costs: computes from the chips' profiles, host staging
// copies, the bytes of every transfer and collective) become a step graph (step_graph.h) whose
// transfers flow over the cluster's topology (topology.h), sharing ports, and its replay gives
// the step time and, per rank, where the time went. Where the cost model and the simulator
// differ (both replay the same lowered schedule with the same computes):
//   - a transfer between stages is a flow that shares its ports with the others in flight,
//     not an independent flight of latency + bytes / bandwidth;
//   - FSDP gathers and reductions are exchanges between the group's chips, unit by unit behind
//     compute with overlap on (the runtime's prefetch and reduction behind the backward), whole
//     with it off, instead of costed rings;
//   - the replicas' gradient all-reduce is a pipelined ring per stage and chip that starts once
//     that stage's gradients are final and shares ports with whatever else still flows.
// Peak memory per rank is the memory model's (planner/memory_model.h).
#pragma once

#include <string>
#include <vector>

#include "parallel/planner/cost_model.h"
#include "parallel/sim/step_graph.h"

namespace h2::parallel::sim {

// Where one rank's step went; the four parts sum to the step.
struct RankTime {
  int rank = 0, chip = 0, replica = 0, position = 0;
  double compute_s = 0;  // F, B, I, W and the optimizer
  double staging_s = 0;  // host copies around transfers and collectives, the token upload
  double exposed_s = 0;  // waiting for bytes in flight: communication that compute did not hide
  double idle_s = 0;     // waiting for another chip's compute (the bubble), or for the step's end
};

struct PlanSimulation {
  double step_s = 0;
  std::vector<RankTime> ranks;          // by job rank
  std::vector<int64_t> peak_bytes;      // per position: one rank of its group
  std::vector<int64_t> capacity_bytes;  // per position: its chip's memory
  pipeline::Schedule schedule;          // the lowered schedule every replica runs
  StepGraph step;
  TaskTimes times;
};

// `lowered`: plan.lowered_schedule() when already at hand.
PlanSimulation simulate_plan(const Plan& plan, const planner::CostInputs& in,
                             const pipeline::Schedule* lowered = nullptr);

// The simulated step of job ranks `ranks` as a Chrome trace-event JSON document (Perfetto,
// chrome://tracing): per rank, its compute stream ("F3.7", "B", "optimizer", "upload", staging
// copies; tid 0) and the transfers it receives (tid 1), times in microseconds.
std::string simulation_trace_json(const PlanSimulation& sim, const std::vector<int>& ranks);

}  // namespace h2::parallel::sim
