// A plan's training step as tasks: replicas, their gradient all-reduce, the optimizer (see
// step_graph.h).
#include "parallel/sim/step_graph.h"

#include "core/error.h"

namespace h2::parallel::sim {

namespace {

// Where stage s's gradients become final in `list`: the indices of its last backward (B, I or
// W) and of its REDUCE_GRAD; -1 where there is none.
struct GradientsFinal {
  int last_backward = -1, reduce = -1;
};
GradientsFinal gradients_final_at(const std::vector<pipeline::Action>& list, int stage) {
  GradientsFinal out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].stage != stage) continue;
    if (list[i].kind == pipeline::ActionKind::REDUCE_GRAD) out.reduce = int(i);
    if (pipeline::is_backward(list[i].kind)) out.last_backward = int(i);
  }
  return out;
}

// The task after which the replicas may start reducing stage s's gradients on chip k of
// position q: where the group reduces them first (more than one chip), the end of its
// REDUCE_GRAD; else the start of the last backward, whose gradient buckets leave while it runs
// (a zero delay after what that backward waits for and the chip's action before it).
TaskId replica_reduce_ready(TaskGraph& graph, const ScheduleGraph& replica, size_t q, size_t k,
                            GradientsFinal at) {
  if (replica.action_task[q][0].size() > 1 && at.reduce >= 0)
    return replica.action_task[q][size_t(at.reduce)][k];
  const TaskId task = replica.action_task[q][size_t(at.last_backward)][k];
  std::vector<TaskId> before = graph.tasks()[size_t(task)].after;
  if (at.last_backward > 0)
    before.push_back(replica.action_task[q][size_t(at.last_backward) - 1][k]);
  return graph.delay(0.0, std::move(before));
}

// A ring all-reduce of `bytes` over `chips` once every chip is ready and has staged its
// gradients (`staging_s`), modelled as the pipelined
// ring it is in practice (NCCL's): each chip streams 2 (R - 1) / R x bytes to the next without
// pause, one flow per link instead of 2 (R - 1) lock-step transfers (a 512-chip ring would be a
// quarter of a million of them), and the 2 (R - 1) - 1 latencies the flow does not pay are
// added after it. Uncontended it takes exactly 2 (R - 1)(latency + bytes / R / bandwidth).
// Returns, per chip, the task after which its result is complete (its incoming stream's).
std::vector<TaskId> ring_all_reduce(TaskGraph& graph, const Topology& topology,
                                    const std::vector<int>& chips, const std::vector<TaskId>& ready,
                                    double bytes, double staging_s) {
  const size_t R = chips.size();
  if (R < 2) return ready;
  const TaskId all_ready = graph.delay(staging_s, ready);
  std::vector<TaskId> done(R);
  for (size_t r = 0; r < R; ++r) {
    const int from = chips[r], to = chips[(r + 1) % R];
    const TaskId stream =
        graph.transfer(from, to, bytes * 2.0 * double(R - 1) / double(R), {all_ready});
    graph.tag(stream, kReplicaReduceTag);
    done[(r + 1) % R] = graph.delay(double(2 * R - 3) * topology.latency(from, to), {stream});
  }
  return done;
}

}  // namespace

StepGraph step_graph(const StepSpec& spec, const Topology& topology) {
  const int cluster_chips = topology.chips();
  H2_CHECK(spec.schedule != nullptr && spec.durations != nullptr && !spec.replicas.empty(),
           "step_graph: a schedule, durations and at least one replica");
  const pipeline::Schedule& schedule = *spec.schedule;
  StepGraph out;
  if (spec.upload_s)  // first on every chip's compute stream
    for (const auto& replica : spec.replicas)
      for (size_t q = 0; q < replica.size(); ++q)
        for (int chip : replica[q])
          out.graph.tag(out.graph.compute(chip, spec.upload_s(int(q))), kUploadTag);
  out.replicas.resize(spec.replicas.size());
  for (size_t r = 0; r < spec.replicas.size(); ++r)
    add_schedule(out.graph, out.replicas[r], schedule, *spec.durations, spec.replicas[r], spec.rows,
                 spec.bytes, spec.units, &topology);

  // Per chip: the tasks its optimizer waits for (every stage's reduced gradients).
  std::vector<std::vector<TaskId>> reduced(static_cast<size_t>(cluster_chips));
  const size_t positions = schedule.per_rank.size();
  for (size_t q = 0; q < positions; ++q) {
    const size_t g = spec.replicas[0][q].size();
    std::vector<int> stages;
    for (const pipeline::Action& a : schedule.per_rank[q])
      if (std::find(stages.begin(), stages.end(), a.stage) == stages.end())
        stages.push_back(a.stage);
    for (int s : stages) {
      const GradientsFinal at = gradients_final_at(schedule.per_rank[q], s);
      if (at.last_backward < 0) continue;
      for (size_t k = 0; k < g; ++k) {
        std::vector<int> ring;
        std::vector<TaskId> ready;
        for (size_t r = 0; r < spec.replicas.size(); ++r) {
          H2_CHECK(spec.replicas[r][q].size() == g,
                   "replica {} has {} chips at position {} where replica 0 has {}", r,
                   spec.replicas[r][q].size(), q, g);
          ring.push_back(spec.replicas[r][q][k]);
          ready.push_back(replica_reduce_ready(out.graph, out.replicas[r], q, k, at));
        }
        const double bytes = spec.replica_bytes ? spec.replica_bytes(s) : 0.0;
        const double staging = spec.replica_staging_s ? spec.replica_staging_s(s) : 0.0;
        const std::vector<TaskId> done =
            ring_all_reduce(out.graph, topology, ring, ready, bytes, staging);
        for (size_t r = 0; r < ring.size(); ++r) reduced[size_t(ring[r])].push_back(done[r]);
      }
    }
  }
  out.optimizer.assign(size_t(cluster_chips), -1);
  for (size_t r = 0; r < spec.replicas.size(); ++r)
    for (size_t q = 0; q < positions; ++q)
      for (int chip : spec.replicas[r][q]) {
        H2_CHECK(chip >= 0 && chip < cluster_chips, "chip {} of a cluster of {}", chip,
                 cluster_chips);
        const double seconds = spec.optimizer_s ? spec.optimizer_s(int(q)) : 0.0;
        out.optimizer[size_t(chip)] = out.graph.compute(chip, seconds, reduced[size_t(chip)]);
        out.graph.tag(out.optimizer[size_t(chip)], kOptimizerTag);
      }
  return out;
}

}  // namespace h2::parallel::sim
