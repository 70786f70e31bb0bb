// A pipeline schedule as compute and transfer tasks (see schedule_graph.h).
#include "parallel/sim/schedule_graph.h"

#include "core/error.h"
#include "parallel/pipeline/replay.h"

namespace h2::parallel::sim {

ScheduleGraph schedule_graph(const pipeline::Schedule& schedule,
                             const pipeline::Durations& durations,
                             const std::vector<int>& chip_of_position, const TransferBytes& bytes) {
  schedule.check_shape();
  const size_t positions = schedule.per_rank.size();
  H2_CHECK(chip_of_position.size() == positions, "{} chips for a schedule of {} positions",
           chip_of_position.size(), positions);
  ScheduleGraph out;
  out.action_task.resize(positions);
  out.transfer_task.resize(positions);
  for (size_t q = 0; q < positions; ++q) {
    out.action_task[q].assign(schedule.per_rank[q].size(), -1);
    out.transfer_task[q].assign(schedule.per_rank[q].size(), -1);
  }
  // The replay calls back in an order where every producer came first, so every dependency is
  // a task already added; a chip's computes follow its list because each position's actions are
  // called back in list order.
  const pipeline::ReplayOutcome outcome = pipeline::replay(
      schedule, [&](int rank, size_t index, std::span<const pipeline::Position> producers) {
        const auto q = size_t(rank);
        const pipeline::Action& a = schedule.per_rank[q][index];
        const int chip = chip_of_position[q];
        std::vector<TaskId> after;
        for (const pipeline::Position& p : producers)
          after.push_back(out.action_task[size_t(p.rank)][p.index]);
        if (pipeline::is_recv(a.kind) && !producers.empty()) {
          // The data crosses from the sender's chip; the receive's own work (staging) follows.
          const int from = chip_of_position[size_t(producers.front().rank)];
          const TaskId moved = out.graph.transfer(from, chip, bytes(a.stage, a.kind), after);
          out.transfer_task[q][index] = moved;
          after = {moved};
        }
        out.action_task[q][index] = out.graph.compute(chip, durations.get(a.stage, a.kind), after);
      });
  if (!outcome.finished)
    H2_THROW(Error, "schedule_graph: the schedule deadlocks: {}",
             pipeline::describe_deadlock(schedule, outcome));
  return out;
}

}  // namespace h2::parallel::sim
