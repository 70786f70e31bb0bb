// Discrete-event replay of a task graph over a flow network (see task_graph.h).
#include "parallel/sim/task_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "core/error.h"

namespace h2::parallel::sim {

TaskId TaskGraph::add(Task task) {
  for (TaskId d : task.after)
    H2_CHECK(d >= 0 && d < int(tasks_.size()), "task {} depends on task {}, not added before it",
             tasks_.size(), d);
  tasks_.push_back(std::move(task));
  return TaskId(tasks_.size() - 1);
}

TaskId TaskGraph::compute(int chip, double seconds, std::vector<TaskId> after) {
  H2_CHECK(seconds >= 0 && std::isfinite(seconds), "a compute of {} s on chip {}", seconds, chip);
  return add({.kind = Task::Kind::compute, .chip = chip, .seconds = seconds, .after = after});
}

TaskId TaskGraph::transfer(int from, int to, double bytes, std::vector<TaskId> after) {
  H2_CHECK(from != to, "a transfer from chip {} to itself", from);
  H2_CHECK(bytes >= 0 && std::isfinite(bytes), "a transfer of {} bytes", bytes);
  return add(
      {.kind = Task::Kind::transfer, .chip = from, .to = to, .bytes = bytes, .after = after});
}

TaskId TaskGraph::delay(double seconds, std::vector<TaskId> after) {
  H2_CHECK(seconds >= 0 && std::isfinite(seconds), "a delay of {} s", seconds);
  return add({.kind = Task::Kind::delay, .seconds = seconds, .after = after});
}

namespace {

// A timed event: a compute ends or a transfer's latency has elapsed (its flow may start).
struct Timed {
  double time;
  TaskId task;
  bool operator>(const Timed& o) const {
    return time > o.time || (time == o.time && task > o.task);
  }
};

}  // namespace

TaskTimes simulate(const TaskGraph& graph, const Topology& topology) {
  const std::vector<Task>& tasks = graph.tasks();
  const size_t n = tasks.size();
  const double inf = std::numeric_limits<double>::infinity();
  TaskTimes t;
  t.start.assign(n, inf);
  t.end.assign(n, inf);

  // Dependents, waiting counts, and each chip's compute order (a compute also waits for the
  // chip's previous one).
  std::vector<std::vector<TaskId>> dependents(n);
  std::vector<int> waiting(n, 0);
  std::vector<TaskId> last_compute(size_t(topology.chips()), -1);  // per chip
  for (size_t i = 0; i < n; ++i) {
    for (TaskId d : tasks[i].after) dependents[size_t(d)].push_back(TaskId(i)), ++waiting[i];
    if (tasks[i].kind != Task::Kind::compute) continue;
    if (tasks[i].chip < 0 || tasks[i].chip >= topology.chips())
      H2_THROW(Error, "task {} computes on chip {}; the cluster has {}", i, tasks[i].chip,
               topology.chips());
    TaskId& previous = last_compute[size_t(tasks[i].chip)];
    if (previous >= 0) {
      dependents[size_t(previous)].push_back(TaskId(i));
      ++waiting[i];
    }
    previous = TaskId(i);
  }

  FlowNetwork net = topology.network();
  std::vector<TaskId> flow_task;  // by flow id (the network numbers flows 0, 1, ...)
  std::priority_queue<Timed, std::vector<Timed>, std::greater<>> timed;
  double now = 0;
  size_t ended = 0;

  auto ready = [&](TaskId id) {  // every dependency has ended, at `now`
    const Task& task = tasks[size_t(id)];
    t.start[size_t(id)] = now;
    if (task.kind == Task::Kind::transfer)
      timed.push({now + topology.latency(task.chip, task.to), id});
    else
      timed.push({now + task.seconds, id});
  };
  auto end = [&](TaskId id) {
    t.end[size_t(id)] = now;
    ++ended;
    for (TaskId d : dependents[size_t(id)])
      if (--waiting[size_t(d)] == 0) ready(d);
  };
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready(TaskId(i));

  while (ended < n) {
    const double next_timed = timed.empty() ? inf : timed.top().time;
    const double next_flow = net.next_finish();
    const double next = std::min(next_timed, next_flow);
    H2_CHECK(next < inf, "{} of {} tasks never became ready (a dependency cycle?)", n - ended, n);
    now = next;
    for (FlowId f : net.advance(now)) end(flow_task[size_t(f)]);
    while (!timed.empty() && timed.top().time <= now) {
      const TaskId id = timed.top().task;
      timed.pop();
      const Task& task = tasks[size_t(id)];
      if (task.kind != Task::Kind::transfer) {
        end(id);
      } else {  // the latency has elapsed: the bytes start to move
        const FlowId f = net.start(topology.path(task.chip, task.to), task.bytes);
        H2_CHECK(f == FlowId(flow_task.size()), "flow ids must be dense");
        flow_task.push_back(id);
      }
    }
  }
  t.makespan = n == 0 ? 0 : *std::max_element(t.end.begin(), t.end.end());
  return t;
}

}  // namespace h2::parallel::sim
