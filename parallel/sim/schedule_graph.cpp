// A pipeline schedule as compute and transfer tasks (see schedule_graph.h).
#include "parallel/sim/schedule_graph.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/pipeline/replay.h"
#include "parallel/pipeline/segments.h"

namespace h2::parallel::sim {

namespace {

// Turns the group collective just added at (q, index) into the runtime's exchange: the task
// each chip ran there (the action's own duration, e.g. staging) ends when it posts its pieces,
// every chip sends every other 1/g of `bytes`, and a zero-length task per chip ends the action
// once its pieces are in.
void exchange_in_group(TaskGraph& graph, ScheduleGraph& out, size_t q, size_t index,
                       const std::vector<int>& chips, double bytes) {
  std::vector<TaskId>& ends = out.action_task[q][index];
  const std::vector<TaskId> posted = ends;
  const double piece = bytes / double(chips.size());
  for (size_t k = 0; k < chips.size(); ++k) {
    std::vector<TaskId>& in = out.transfer_tasks[q][index][k];
    for (size_t j = 0; j < chips.size(); ++j)
      if (j != k) in.push_back(graph.transfer(chips[j], chips[k], piece, {posted[j]}));
    std::vector<TaskId> after = in;
    after.push_back(posted[k]);
    ends[k] = graph.compute(chips[k], 0.0, after);
  }
}

}  // namespace

ScheduleGraph schedule_graph(const pipeline::Schedule& schedule,
                             const pipeline::Durations& durations,
                             const std::vector<std::vector<int>>& groups, int64_t rows,
                             const TransferBytes& bytes) {
  ScheduleGraph out;
  TaskGraph graph;
  add_schedule(graph, out, schedule, durations, groups, rows, bytes);
  out.graph = std::move(graph);
  return out;
}

void add_schedule(TaskGraph& graph, ScheduleGraph& out, const pipeline::Schedule& schedule,
                  const pipeline::Durations& durations, const std::vector<std::vector<int>>& groups,
                  int64_t rows, const TransferBytes& bytes) {
  schedule.check_shape();
  const size_t positions = schedule.per_rank.size();
  H2_CHECK(groups.size() == positions, "{} groups for a schedule of {} positions", groups.size(),
           positions);
  size_t largest = 0;
  for (const auto& g : groups) {
    H2_CHECK(!g.empty(), "a schedule position without chips");
    largest = std::max(largest, g.size());
  }
  H2_CHECK(rows >= int64_t(largest), "micro-batches of {} rows over a group of {} chips", rows,
           largest);
  out.action_task.clear();
  out.transfer_tasks.clear();
  out.action_task.resize(positions);
  out.transfer_tasks.resize(positions);
  for (size_t q = 0; q < positions; ++q) {
    const size_t n = schedule.per_rank[q].size();
    out.action_task[q].assign(n, std::vector<TaskId>(groups[q].size(), -1));
    out.transfer_tasks[q].assign(n, std::vector<std::vector<TaskId>>(groups[q].size()));
  }
  // The replay calls back in an order where every producer came first, so every dependency is
  // a task already added; each chip's computes follow its position's list.
  const pipeline::ReplayOutcome outcome = pipeline::replay(
      schedule, [&](int rank, size_t index, std::span<const pipeline::Position> producers) {
        const auto q = size_t(rank);
        const pipeline::Action& a = schedule.per_rank[q][index];
        const std::vector<int>& chips = groups[q];
        for (size_t k = 0; k < chips.size(); ++k) {
          std::vector<TaskId> after;
          for (const pipeline::Position& p : producers) {
            const auto& from = out.action_task[size_t(p.rank)][p.index];
            if (size_t(p.rank) == q) {  // this group: the same chip's rows
              after.push_back(from[k]);
              continue;
            }
            // Another group: its chips that hold some of this chip's rows. A receive moves those
            // rows from each (a schedule without transfers hands them over for free).
            const std::vector<int>& senders = groups[size_t(p.rank)];
            const auto [lo, hi] = pipeline::group_rows(rows, int64_t(k), int64_t(chips.size()));
            for (size_t j = 0; j < senders.size(); ++j) {
              const auto [slo, shi] =
                  pipeline::group_rows(rows, int64_t(j), int64_t(senders.size()));
              const int64_t overlap = std::min(hi, shi) - std::max(lo, slo);
              if (overlap <= 0) continue;
              if (!pipeline::is_recv(a.kind)) {
                after.push_back(from[j]);
                continue;
              }
              const double piece = bytes(a.stage, a.kind) * double(overlap) / double(rows);
              const TaskId moved = graph.transfer(senders[j], chips[k], piece, {from[j]});
              out.transfer_tasks[q][index][k].push_back(moved);
              after.push_back(moved);
            }
          }
          out.action_task[q][index][k] =
              graph.compute(chips[k], durations.get(a.stage, a.kind), after);
        }
        if (chips.size() > 1 && (a.kind == pipeline::ActionKind::UNSHARD ||
                                 a.kind == pipeline::ActionKind::REDUCE_GRAD))
          exchange_in_group(graph, out, q, index, chips, bytes(a.stage, a.kind));
      });
  if (!outcome.finished)
    H2_THROW(Error, "schedule_graph: the schedule deadlocks: {}",
             pipeline::describe_deadlock(schedule, outcome));
}

}  // namespace h2::parallel::sim
