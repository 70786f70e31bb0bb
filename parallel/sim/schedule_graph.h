// A pipeline schedule as a task graph: every action of every schedule position becomes a compute
// task on that position's chip (its duration from pipeline::Durations: compute, staging copies,
// collectives), and every receive a transfer from the sender's chip first, of the bytes the
// caller says, which then flows over the topology and shares ports with the transfers in flight.
// The dependencies are the pipeline replay's (pipeline/replay.h), so on a topology where no two
// transfers are in flight through one port at once the step takes exactly what
// pipeline::simulate says with flights of latency + bytes / bandwidth; where they are, it takes
// longer, as a real link would. One chip per schedule position (groups of several ranks, FSDP
// gathers and replicas are built elsewhere).
#pragma once

#include <functional>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/sim/task_graph.h"

namespace h2::parallel::sim {

// Bytes a receive of `stage` (RECV_F: the activation from stage - 1; RECV_B: the gradient from
// stage + 1) moves for one micro-batch.
using TransferBytes = std::function<double(int stage, pipeline::ActionKind recv)>;

struct ScheduleGraph {
  TaskGraph graph;
  // Per position and action index: the task that ends when the action ends.
  std::vector<std::vector<TaskId>> action_task;
  // Per position and action index: the transfer task a receive waits for (-1 otherwise).
  std::vector<std::vector<TaskId>> transfer_task;
};

// `chip_of_position[q]`: the cluster chip of schedule position q (distinct chips). Throws
// pipeline's deadlock description when the schedule cannot run.
ScheduleGraph schedule_graph(const pipeline::Schedule& schedule,
                             const pipeline::Durations& durations,
                             const std::vector<int>& chip_of_position, const TransferBytes& bytes);

}  // namespace h2::parallel::sim
