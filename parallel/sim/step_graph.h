// One training step of a plan as a task graph: the step's token ids uploaded to every chip, every
// replica's pipeline (schedule_graph.h) on
// its own chips, then, per stage and chip, the gradient all-reduce across the replicas (a ring
// over the chips that hold the same share in each replica, pipelined: each streams 2 (R - 1) / R
// of the bytes to the next, with the ring's 2 (R - 1) latencies) starting once every chip of the
// ring is ready: after the stage's REDUCE_GRAD where the group reduces first, else when its last
// backward starts, whose gradient buckets the runtime's reducer sends while it runs; so it
// overlaps that backward and the rest of the step's; and the optimizer on every chip after its
// last backward and all its stages' reductions.
#pragma once

#include <functional>
#include <vector>

#include "parallel/sim/schedule_graph.h"

namespace h2::parallel::sim {

struct StepSpec {
  const pipeline::Schedule* schedule = nullptr;  // lowered
  const pipeline::Durations* durations = nullptr;
  // [replica][position]: the chips of each schedule position in each replica (same group sizes
  // in every replica).
  std::vector<std::vector<std::vector<int>>> replicas;
  int64_t rows = 1;  // rows of a micro-batch
  TransferBytes bytes;
  // Bytes one chip of the position holding `stage` all-reduces over the replicas (its FP32
  // gradients of the stage, or its FSDP shard of them).
  std::function<double(int stage)> replica_bytes;
  // Seconds of host staging before that ring leaves a chip (0 when empty).
  std::function<double(int stage)> replica_staging_s;
  // Seconds of the optimizer on one chip of `position` (0 when empty).
  std::function<double(int position)> optimizer_s;
  // Seconds of the upload on one chip of `position` before its first action (0 when empty).
  std::function<double(int position)> upload_s;
  // Per stage, its units where group collectives overlap compute (schedule_graph.h).
  std::vector<StageUnits> units;
};

// Tags (Task::tag) of the tasks step_graph adds beside the schedules' actions.
constexpr int32_t kOptimizerTag = -2, kUploadTag = -3, kReplicaReduceTag = -4;

struct StepGraph {
  TaskGraph graph;
  std::vector<ScheduleGraph> replicas;  // task ids of each replica's actions (graph empty)
  std::vector<TaskId> optimizer;        // per chip (cluster index), -1 for chips not in the plan
};

StepGraph step_graph(const StepSpec& spec, const Topology& topology);

}  // namespace h2::parallel::sim
