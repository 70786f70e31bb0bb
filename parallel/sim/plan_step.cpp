// A plan's step on a cluster, simulated (see plan_step.h).
#include "parallel/sim/plan_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace h2::parallel::sim {

namespace {

using pipeline::ActionKind;

// The step graph's inputs from the cost model's pieces.
struct StepInputs {
  pipeline::Durations durations;
  StepSpec spec;
};

StepInputs step_inputs(const Plan& plan, const planner::PlanCosts& costs,
                       const pipeline::Schedule& schedule, const planner::ModelShape& model) {
  const int P = plan.positions(), S = plan.stages();
  const bool overlapped = plan.fsdp && plan.overlap;
  StepInputs out{.durations = costs.durations};
  // Group collectives move their bytes as flows here: their actions keep only the staging,
  // which the overlapped exchanges do unit by unit instead.
  for (int s = 0; s < S; ++s) {
    const planner::StageCosts& sc = costs.stages[size_t(s)];
    if (plan.group_sizes[size_t(sc.position)] == 1) continue;
    if (plan.fsdp)
      out.durations.set(s, ActionKind::UNSHARD, overlapped ? 0.0 : sc.gather_staging_s);
    out.durations.set(s, ActionKind::REDUCE_GRAD, overlapped ? 0.0 : sc.reduce_staging_s);
  }
  StepSpec& spec = out.spec;
  spec.schedule = &schedule;
  spec.rows = plan.micro_batch_rows;
  for (int r = 0; r < plan.replicas; ++r) {
    auto& replica = spec.replicas.emplace_back();
    for (int q = 0; q < P; ++q) {
      auto& group = replica.emplace_back();
      for (int k = 0; k < plan.group_sizes[size_t(q)]; ++k)
        group.push_back(planner::chip_of_rank(plan, plan.rank_at({r, q, k})));
    }
  }
  const double wire = costs.micro_batch_wire_bytes;
  std::vector<double> gather(static_cast<size_t>(S)), reduce(static_cast<size_t>(S)),
      replica(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    const planner::StageCosts& sc = costs.stages[size_t(s)];
    const double g = double(plan.group_sizes[size_t(sc.position)]);
    gather[size_t(s)] = sc.gather_bytes;
    // FSDP reduce-scatters; a replicated group all-reduces: twice the traffic.
    reduce[size_t(s)] = plan.fsdp ? sc.gradient_bytes : 2 * sc.gradient_bytes;
    double params = sc.params;
    if (model.tie_embeddings && P > 1 && s == S - 1)  // the head's copy of the tied table
      params += double(model.embedding_parameters());
    replica[size_t(s)] = plan.replicas > 1 ? 4.0 * params / (plan.fsdp ? g : 1.0) : 0.0;
    if (overlapped) {
      StageUnits& units =
          spec.units.emplace_back(StageUnits{.forward_s = sc.unit_forward_s,
                                             .last_backward_s = sc.unit_last_backward_s,
                                             .gather_staging_s = sc.unit_gather_staging_s,
                                             .reduce_staging_s = sc.unit_reduce_staging_s});
      const double compute_bytes = sc.params > 0 ? sc.gather_bytes / sc.params : 0;
      for (double p : sc.unit_params) {
        units.gather_bytes.push_back(p * compute_bytes);
        units.reduce_bytes.push_back(p * 4.0);
      }
    }
  }
  spec.bytes = [wire, gather, reduce](int stage, ActionKind kind) {
    switch (kind) {
      case ActionKind::UNSHARD:
        return gather[size_t(stage)];
      case ActionKind::REDUCE_GRAD:
        return reduce[size_t(stage)];
      default:
        return wire;
    }
  };
  spec.replica_bytes = [replica](int stage) { return replica[size_t(stage)]; };
  // The staging of a position's gradients for the replicas, shared out over its stages by bytes.
  std::vector<double> position_bytes(static_cast<size_t>(P), 0.0);
  for (int s = 0; s < S; ++s) position_bytes[size_t(s % P)] += replica[size_t(s)];
  std::vector<double> staging(static_cast<size_t>(S), 0.0);
  for (int s = 0; s < S; ++s)
    if (position_bytes[size_t(s % P)] > 0)
      staging[size_t(s)] = costs.positions[size_t(s % P)].replica_staging_s * replica[size_t(s)] /
                           position_bytes[size_t(s % P)];
  spec.replica_staging_s = [staging](int stage) { return staging[size_t(stage)]; };
  std::vector<double> optimizer, upload;
  for (const planner::PositionCosts& pc : costs.positions) {
    optimizer.push_back(pc.optimizer_s);
    upload.push_back(pc.upload_s);
  }
  spec.optimizer_s = [optimizer](int q) { return optimizer[size_t(q)]; };
  spec.upload_s = [upload](int q) { return upload[size_t(q)]; };
  return out;
}

// When the communication a task waited for began: for a transfer, when it was ready to go; for
// a delay, that of the communication it waited for last; never for a compute (another chip's
// work, not bytes in flight).
double communication_began(const TaskGraph& graph, const TaskTimes& t, TaskId id) {
  const double never = std::numeric_limits<double>::infinity();
  while (true) {
    const Task& task = graph.tasks()[size_t(id)];
    if (task.kind == Task::Kind::transfer) return t.start[size_t(id)];
    if (task.kind == Task::Kind::compute || task.after.empty())
      return task.kind == Task::Kind::delay ? t.start[size_t(id)] : never;
    id = *std::max_element(task.after.begin(), task.after.end(),
                           [&](TaskId a, TaskId b) { return t.end[size_t(a)] < t.end[size_t(b)]; });
  }
}

bool is_compute_task(const pipeline::Schedule& schedule, int32_t tag) {
  if (tag == kOptimizerTag) return true;
  if (tag < 0) return false;
  return pipeline::is_compute(schedule.per_rank[tag_position(tag)][tag_index(tag)].kind);
}

// Splits every rank's step into compute, staging, exposed communication and idle time (see
// RankTime): a gap before a compute task is exposed communication from when the bytes it waited
// for last began to move, idle before.
void account(PlanSimulation& sim, const Cluster& cluster) {
  const TaskGraph& graph = sim.step.graph;
  std::vector<int> rank_of_chip(size_t(cluster.size()), -1);
  for (const RankTime& r : sim.ranks) rank_of_chip[size_t(r.chip)] = r.rank;
  std::vector<double> previous_end(sim.ranks.size(), 0);
  for (size_t id = 0; id < graph.tasks().size(); ++id) {
    const Task& task = graph.tasks()[id];
    if (task.kind != Task::Kind::compute) continue;
    const int rank = rank_of_chip[size_t(task.chip)];
    RankTime& r = sim.ranks[size_t(rank)];
    const double start = sim.times.start[id], end = sim.times.end[id];
    const double gap = start - previous_end[size_t(rank)];
    if (gap > 0 && !task.after.empty()) {
      const TaskId last = *std::max_element(
          task.after.begin(), task.after.end(),
          [&](TaskId a, TaskId b) { return sim.times.end[size_t(a)] < sim.times.end[size_t(b)]; });
      const double began = communication_began(graph, sim.times, last);
      const double exposed = std::max(0.0, start - std::max(previous_end[size_t(rank)], began));
      r.exposed_s += exposed;
      r.idle_s += gap - exposed;
    } else if (gap > 0) {
      r.idle_s += gap;
    }
    (is_compute_task(sim.schedule, task.tag) ? r.compute_s : r.staging_s) += end - start;
    previous_end[size_t(rank)] = end;
  }
  for (RankTime& r : sim.ranks) r.idle_s += sim.step_s - previous_end[size_t(r.rank)];
}

std::string task_name(const pipeline::Schedule& schedule, const Task& task) {
  switch (task.tag) {
    case kOptimizerTag:
      return "optimizer";
    case kUploadTag:
      return "upload";
    case kReplicaReduceTag:
      return "replica all-reduce";
    default:
      break;
  }
  if (task.tag < 0) return task.kind == Task::Kind::transfer ? "transfer" : "wait";
  const pipeline::Action& a = schedule.per_rank[tag_position(task.tag)][tag_index(task.tag)];
  if (a.microbatch < 0) return fmt::format("{}{}", pipeline::action_kind_name(a.kind), a.stage);
  return fmt::format("{}{}.{}", pipeline::action_kind_name(a.kind), a.stage, a.microbatch);
}

}  // namespace

PlanSimulation simulate_plan(const Plan& plan, const planner::CostInputs& in,
                             const pipeline::Schedule* lowered) {
  PlanSimulation sim;
  sim.schedule = lowered ? *lowered : plan.lowered_schedule();
  const planner::PlanCosts costs = planner::plan_costs(plan, in, sim.schedule);
  const StepInputs inputs = step_inputs(plan, costs, sim.schedule, in.model);
  StepSpec spec = inputs.spec;
  spec.durations = &inputs.durations;
  const Topology topology(*in.cluster);
  sim.step = step_graph(spec, topology);
  sim.times = simulate(sim.step.graph, topology);
  sim.step_s = sim.times.makespan;
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    const Plan::Place place = plan.place_of(rank);
    sim.ranks.push_back({.rank = rank,
                         .chip = planner::chip_of_rank(plan, rank),
                         .replica = place.replica,
                         .position = place.position});
  }
  for (int q = 0; q < plan.positions(); ++q) {
    sim.peak_bytes.push_back(costs.positions[size_t(q)].peak_bytes);
    sim.capacity_bytes.push_back(
        in.cluster->chip_of(planner::chip_of_rank(plan, plan.rank_at({0, q, 0}))).memory_bytes);
  }
  account(sim, *in.cluster);
  return sim;
}

std::string simulation_trace_json(const PlanSimulation& sim, const std::vector<int>& ranks) {
  std::vector<int> rank_of_chip;
  for (const RankTime& r : sim.ranks) {
    if (size_t(r.chip) >= rank_of_chip.size()) rank_of_chip.resize(size_t(r.chip) + 1, -1);
    rank_of_chip[size_t(r.chip)] = r.rank;
  }
  std::vector<bool> traced(sim.ranks.size(), false);
  for (int rank : ranks) {
    H2_CHECK(rank >= 0 && rank < int(sim.ranks.size()), "rank {} of a plan of {} ranks", rank,
             sim.ranks.size());
    traced[size_t(rank)] = true;
  }
  auto traced_chip = [&](int chip) {
    return chip >= 0 && size_t(chip) < rank_of_chip.size() && rank_of_chip[size_t(chip)] >= 0 &&
           traced[size_t(rank_of_chip[size_t(chip)])];
  };
  nlohmann::json events = nlohmann::json::array();
  for (int rank : ranks) {
    const RankTime& r = sim.ranks[size_t(rank)];
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args",
                       {{"name", fmt::format("rank {} (chip {}, replica {}, position {})", rank,
                                             r.chip, r.replica, r.position)}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"tid", 1},
                      {"args", {{"name", "incoming transfers"}}}});
  }
  const TaskGraph& graph = sim.step.graph;
  for (size_t id = 0; id < graph.tasks().size(); ++id) {
    const Task& task = graph.tasks()[id];
    const bool compute = task.kind == Task::Kind::compute;
    if (task.kind == Task::Kind::delay) continue;
    const int chip = compute ? task.chip : task.to;
    if (!traced_chip(chip)) continue;
    const double start = sim.times.start[id], end = sim.times.end[id];
    if (compute && end <= start) continue;
    nlohmann::json event = {
        {"name", task_name(sim.schedule, task)},
        {"cat",
         compute ? (is_compute_task(sim.schedule, task.tag) ? "compute" : "staging") : "comm"},
        {"ph", "X"},
        {"ts", start * 1e6},
        {"dur", (end - start) * 1e6},
        {"pid", rank_of_chip[size_t(chip)]},
        {"tid", compute ? 0 : 1}};
    if (!compute) event["args"] = {{"from_chip", task.chip}, {"bytes", task.bytes}};
    events.push_back(std::move(event));
  }
  return nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace h2::parallel::sim
