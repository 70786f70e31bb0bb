// A pipeline schedule as a task graph. Schedule position q runs on a group of chips (HeteroPP:
// one or more, each taking rows [R k / g, R (k + 1) / g) of every micro-batch of R rows, as the
// runtime splits them). Every action becomes a compute task on each chip of its group (its
// duration from pipeline::Durations, the figure for one chip of that group: compute, staging
// copies, collectives); every receive first becomes transfers from each chip of the sending
// group that holds some of the receiving chip's rows, of those rows' share of the micro-batch's
// bytes (the runtime's re-split between groups of different sizes), which then flow over the
// topology and share ports with the transfers in flight. The dependencies are the pipeline
// replay's (pipeline/replay.h), so with one chip per position and no two transfers in flight
// through one port at once the step takes exactly what pipeline::simulate says with flights of
// latency + bytes / bandwidth; where transfers share a port, it takes longer, as a real link
// would. On a group of g > 1 chips UNSHARD and REDUCE_GRAD (FSDP) are the group's collectives:
// once every chip of the group has reached the action, each chip streams the (g - 1) / g of the
// bytes an all-gather or reduce-scatter moves through every chip's ports to the next chip of the
// group (the runtime posts g - 1 point-to-point pieces per chip instead; on the group's
// non-blocking switch that takes the same time, and one flow per chip keeps a 1,000-chip step
// small). A group of device-direct chips (ChipSpec::device_direct: NCCL-class libraries using
// all of a node's network rails) spanning several nodes, when the topology is given, moves the
// bytes in two levels instead: each chip streams (N - 1)/N of them / L to its counterpart in the
// next of the group's N nodes (L chips each) and (L - 1)/L of them to the next chip of its node,
// both at once. The action ends on a chip once what streams into it is in (overlap off: the
// whole stage's gather before its compute). With the stage's units given (overlap on, ZeroPP),
// UNSHARD starts every unit's gather and returns, unit after unit (each staged on every chip
// first), and the stage's next compute runs unit by unit, each unit once its own parameters are in;
// the stage's last backward before REDUCE_GRAD also runs unit by unit (backward order) and
// each unit's reduction starts as soon as the unit is done on every chip, and REDUCE_GRAD ends
// once they are all in. Replicas and the optimizer are the caller's.
#pragma once

#include <functional>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/sim/task_graph.h"

namespace h2::parallel::sim {

// Bytes a receive of `stage` (RECV_F: the activation from stage - 1; RECV_B: the gradient from
// stage + 1) moves for one whole micro-batch (all its rows); for UNSHARD and REDUCE_GRAD, the
// whole collective's bytes (the stage's parameters in the compute dtype; its FP32 gradients).
using TransferBytes = std::function<double(int stage, pipeline::ActionKind recv)>;

// One stage's units, for the overlap of its group collectives (overlap on). Per unit, in compute
// order: its forward (the stage's F is their sum), what the stage's last backward action (B, or
// W where the backward is split) runs of it (that action is their sum), the bytes of its share
// of UNSHARD's and REDUCE_GRAD's collective (the group's whole), and the host staging a chip
// does before sending its pieces of them (a delay on no chip: the copy engine's).
struct StageUnits {
  std::vector<double> forward_s, last_backward_s, gather_bytes, reduce_bytes;
  std::vector<double> gather_staging_s, reduce_staging_s;
};

// Tags (Task::tag) of an action's tasks: position and action index; other tasks keep their own
// (negative) tags.
constexpr int32_t kActionIndexBits = 20;
constexpr int32_t action_tag(size_t position, size_t index) {
  return int32_t((position << kActionIndexBits) | index);
}
constexpr size_t tag_position(int32_t tag) {
  return size_t(tag) >> kActionIndexBits;
}
constexpr size_t tag_index(int32_t tag) {
  return size_t(tag) & ((1u << kActionIndexBits) - 1);
}

struct ScheduleGraph {
  TaskGraph graph;
  // Per position, action index and chip of the group: the task that ends when the action ends
  // on that chip.
  std::vector<std::vector<std::vector<TaskId>>> action_task;
  // Per position, action index and chip of the group: the transfers a receive (or a group
  // collective) waits for.
  std::vector<std::vector<std::vector<std::vector<TaskId>>>> transfer_tasks;
};

// `groups[q]`: the cluster chips of schedule position q (distinct across positions), `rows`: a
// micro-batch's rows (at least the largest group). Throws pipeline's deadlock description when
// the schedule cannot run. `units`: per stage (empty, or one entry per stage), the units whose
// collectives overlap compute; a group collective of a stage without them is exchanged whole.
ScheduleGraph schedule_graph(const pipeline::Schedule& schedule,
                             const pipeline::Durations& durations,
                             const std::vector<std::vector<int>>& groups, int64_t rows,
                             const TransferBytes& bytes, const std::vector<StageUnits>& units = {},
                             const Topology* topology = nullptr);
// The same, added to `graph` (another replica's tasks may be there); `out.graph` stays empty.
void add_schedule(TaskGraph& graph, ScheduleGraph& out, const pipeline::Schedule& schedule,
                  const pipeline::Durations& durations, const std::vector<std::vector<int>>& groups,
                  int64_t rows, const TransferBytes& bytes,
                  const std::vector<StageUnits>& units = {}, const Topology* topology = nullptr);

}  // namespace h2::parallel::sim
