// TaskGraph: one training step as tasks with dependencies, and its discrete-event replay over a
// cluster's topology: the cluster simulator's engine.
//
// A task is compute on one chip (a duration, from profiles or data sheets), a transfer between
// two chips (bytes; it starts once its dependencies are done plus the link's latency, then moves
// as a flow sharing ports with the other transfers in flight, topology.h), or a delay that
// occupies nothing (joins, protocol latencies). A task starts when
// every task it depends on has ended; computes of one chip run one at a time, in the order they
// were added (a chip's compute stream). Collectives and pipeline schedules are built from these
// two kinds by the callers. simulate() returns every task's start and end time; it advances from
// event to event (a compute ending, a latency elapsing, a flow finishing), exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/sim/topology.h"

namespace h2::parallel::sim {

using TaskId = int;

struct Task {
  // delay: time that passes on no chip (a join of dependencies, a protocol's latencies).
  enum class Kind { compute, transfer, delay } kind = Kind::compute;
  int chip = 0;        // compute: the chip; transfer: the sender
  int to = -1;         // transfer: the receiver
  double seconds = 0;  // compute, delay: duration
  double bytes = 0;    // transfer: size
  std::vector<TaskId> after;
  int32_t tag = -1;  // the builder's label (what the task stands for); simulate() ignores it
};

class TaskGraph {
 public:
  // `after`: tasks already added. Compute runs after the chip's previous compute too.
  TaskId compute(int chip, double seconds, std::vector<TaskId> after = {});
  TaskId transfer(int from, int to, double bytes, std::vector<TaskId> after = {});
  TaskId delay(double seconds, std::vector<TaskId> after = {});
  void tag(TaskId id, int32_t tag) { tasks_.at(size_t(id)).tag = tag; }
  const std::vector<Task>& tasks() const { return tasks_; }

 private:
  TaskId add(Task task);
  std::vector<Task> tasks_;
};

struct TaskTimes {
  std::vector<double> start, end;  // per task, seconds from 0
  double makespan = 0;
};

TaskTimes simulate(const TaskGraph& graph, const Topology& topology);

}  // namespace h2::parallel::sim
