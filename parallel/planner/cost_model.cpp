// The cost model (see cost_model.h; derivations in docs/planner.md).
#include "parallel/planner/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "parallel/planner/memory_model.h"

namespace h2::parallel::planner {
namespace {

using pipeline::ActionKind;

// ZeroPP prefetch (overlap on): UNSHARD posts every unit's gather at once, the gathers cross the
// link one after another (`gather_s`, in compute order) and unit i computes (`compute_s`) once
// its own gather and unit i - 1 are done. Returns how much later the stage's compute ends than
// without any gather: the communication compute did not hide.
double prefetched_gather_s(const std::vector<double>& gather_s,
                           const std::vector<double>& compute_s) {
  double arrived = 0, done = 0, busy = 0;
  for (size_t i = 0; i < gather_s.size(); ++i) {
    arrived += gather_s[i];
    done = std::max(done, arrived) + compute_s[i];
    busy += compute_s[i];
  }
  return done - busy;
}

// Reduction behind the backward (overlap on): the stage's last backward posts unit i's
// reduce-scatter (`reduce_s`, in backward order) as soon as the unit's backward (`backward_s`)
// ends; the reductions cross the link one after another and REDUCE_GRAD, right after the
// backward, waits for the last. Returns that wait: the reduction compute did not hide.
double overlapped_reduce_s(const std::vector<double>& reduce_s,
                           const std::vector<double>& backward_s) {
  double computed = 0, link_free = 0;
  for (size_t i = 0; i < reduce_s.size(); ++i) {
    computed += backward_s[i];
    link_free = std::max(link_free, computed) + reduce_s[i];
  }
  return std::max(0.0, link_free - computed);
}

// Bytes crossing the wire per micro-batch row: the wire dtype's elements, and for the FP8 wire
// one FP32 scale per token.
double wire_bytes_per_row(const ModelShape& m, DType wire) {
  double bytes = double(m.activation_bytes_per_row(wire));
  if (wire == DType::f8e4m3) bytes += 4.0 * double(m.seq_len);
  return bytes;
}

struct Group {
  int first_chip = 0;  // the cluster chip of the group's rank 0 (replica 0)
  const ChipSpec* chip = nullptr;
  const ChipProfile* profile = nullptr;
  int size = 1;
  int64_t rows = 0;  // per rank
  LinkSpec link;     // between two ranks of the group
};

}  // namespace

const ChipProfile& Profiles::of(const std::string& chip) const {
  auto it = by_chip.find(chip);
  if (it == by_chip.end())
    H2_THROW(ConfigError,
             "no profile of chip type '{}'; measure it with h2 profile --cluster FILE "
             "CONFIG",
             chip);
  return it->second;
}

double ring_s(double bytes, int g, const LinkSpec& link, int passes) {
  if (g <= 1 || bytes <= 0) return 0;
  return double(passes) * double(g - 1) * link.seconds(bytes / double(g));
}

int chip_of_rank(const Plan& plan, int rank) {
  const std::string& device = plan.devices.at(size_t(rank));
  const size_t colon = device.find(':');
  int chip = -1;
  if (device.substr(0, colon) == "vchip" && colon != std::string::npos) {
    const std::string index = device.substr(colon + 1);
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos)
      chip = std::stoi(index);
  }
  if (chip < 0)
    H2_THROW(ConfigError, "{}: rank {} drives '{}'; a plan on a cluster names chips vchip:K",
             plan.source, rank, device);
  return chip;
}

UnitKind unit_kind(const ModelShape& model, int unit) {
  if (unit == 0) return UnitKind::embedding;
  if (unit == int(model.n_layers) + 1) return UnitKind::head;
  return UnitKind::block;
}

bool PlanEstimate::fits() const {
  return memory_problem().empty();
}

std::string PlanEstimate::memory_problem() const {
  for (size_t q = 0; q < positions.size(); ++q)
    if (positions[q].peak_bytes > usable_bytes(positions[q].capacity_bytes))
      return fmt::format(
          "group {} ({}): {:.1f} MiB of {:.1f} MiB ({:.0f}% of it usable: the "
          "memory model's margin)",
          q, positions[q].chip, double(positions[q].peak_bytes) / (1 << 20),
          double(positions[q].capacity_bytes) / (1 << 20), 100 * (1 - kMemoryHeadroom));
  return {};
}

double PlanEstimate::tokens_per_s(const Plan& plan, const ModelShape& model) const {
  return double(plan.global_micro_batches() * plan.micro_batch_rows * model.seq_len) / step_s;
}

PlanCosts plan_costs(const Plan& plan, const CostInputs& in, const pipeline::Schedule& schedule) {
  H2_CHECK(in.cluster != nullptr && in.profiles != nullptr, "cost model without cluster/profiles");
  const Cluster& cluster = *in.cluster;
  const ModelShape& m = in.model;
  const int P = plan.positions(), S = plan.stages(), R = plan.replicas;
  H2_CHECK(plan.world_size() <= cluster.size(), "a plan of {} ranks on a cluster of {} chips",
           plan.world_size(), cluster.size());
  const DType wire = plan.wire_dtype.value_or(in.dtype);
  const double compute_bytes = double(dtype_storage_bytes(in.dtype, 1));

  std::vector<Group> groups;
  for (int q = 0; q < P; ++q) {
    Group g;
    g.first_chip = chip_of_rank(plan, plan.rank_at({0, q, 0}));
    g.chip = &cluster.chip_of(g.first_chip);
    g.profile = &in.profiles->of(g.chip->name);
    g.size = plan.group_sizes[size_t(q)];
    g.rows = plan.micro_batch_rows / g.size;
    g.link = g.size > 1 ? cluster.link(g.first_chip, chip_of_rank(plan, plan.rank_at({0, q, 1})))
                        : LinkSpec{1e30, 0};
    groups.push_back(g);
  }
  auto host_s = [&](const Group& g, double bytes) {  // a staging copy over the chip's host link
    return bytes / (g.chip->link_bandwidth / (g.chip->time_scale * cluster.time_scale));
  };
  // An FSDP all-gather or reduce-scatter of `bytes` over a group: the ring, plus staging of the
  // shard in and the whole out.
  // (Device-direct chips, cluster.h: none; their vendor library moves device memory.)
  auto sharded_staging_s = [&](const Group& g, double bytes) {
    return g.chip->device_direct ? 0.0 : host_s(g, bytes + bytes / double(g.size));
  };
  auto sharded_collective_s = [&](const Group& g, double bytes) {
    return ring_s(bytes, g.size, g.link, 1) + sharded_staging_s(g, bytes);
  };
  auto params_of_unit = [&](int u) -> double {
    switch (unit_kind(m, u)) {
      case UnitKind::embedding:
        return double(m.embedding_parameters());
      case UnitKind::block:
        return double(m.block_parameters());
      case UnitKind::head:
        return double(m.head_parameters());
    }
    return 0;
  };

  PlanCosts out{.durations = pipeline::Durations(S)};
  pipeline::Durations& d = out.durations;
  out.micro_batch_wire_bytes = double(plan.micro_batch_rows) * wire_bytes_per_row(m, wire);
  std::vector<StageActivations> activations(static_cast<size_t>(S));
  std::vector<int64_t> state(size_t(P), 0);
  out.positions.resize(size_t(P));
  std::vector<bool> split_stages(size_t(S), false);  // stages whose backward is split (a W)
  for (const auto& actions : schedule.per_rank)
    for (const pipeline::Action& a : actions)
      if (a.kind == ActionKind::W) split_stages[size_t(a.stage)] = true;
  for (int s = 0; s < S; ++s) {
    const int q = s % P;
    const Group& g = groups[size_t(q)];
    StageCosts& sc = out.stages.emplace_back();
    sc.position = q;
    double F = 0, B = 0, I = 0, W = 0;
    std::vector<UnitCost> costs;
    std::vector<UnitKind> kinds;
    std::vector<double> unit_gather_s, unit_reduce_s;
    for (int u = plan.layout.begin(s); u < plan.layout.end(s); ++u) {
      const UnitKind kind = unit_kind(m, u);
      const UnitCost c = g.profile->cost(kind, g.rows);
      const double redo = plan.recompute && kind == UnitKind::block ? c.forward_s : 0;
      F += c.forward_s, B += c.backward_s + redo, I += c.input_s + redo, W += c.weight_s;
      sc.params += params_of_unit(u);
      sc.unit_params.push_back(params_of_unit(u));
      unit_gather_s.push_back(sharded_collective_s(g, params_of_unit(u) * compute_bytes));
      sc.unit_forward_s.push_back(c.forward_s);
      unit_reduce_s.push_back(sharded_collective_s(g, params_of_unit(u) * 4.0));
      if (plan.fsdp) {
        sc.unit_gather_staging_s.push_back(sharded_staging_s(g, params_of_unit(u) * compute_bytes));
        sc.unit_reduce_staging_s.push_back(sharded_staging_s(g, params_of_unit(u) * 4.0));
      }
      sc.unit_last_backward_s.push_back(split_stages[size_t(s)] ? c.weight_s : c.backward_s + redo);
      out.positions[size_t(q)].optimizer_s += c.optimizer_s / (plan.fsdp ? double(g.size) : 1.0);
      state[size_t(q)] += unit_state_bytes(m, kind, in.dtype, g.size, plan.fsdp);
      costs.push_back(c);
      kinds.push_back(kind);
    }
    activations[size_t(s)] = stage_activations(costs, kinds, plan.recompute,
                                               g.rows * m.activation_bytes_per_row(in.dtype));
    d.set(s, ActionKind::F, F).set(s, ActionKind::B, B).set(s, ActionKind::I, I);
    d.set(s, ActionKind::W, W);
    // Transfers from the previous stage (and gradients back to it) when it runs elsewhere.
    if (s > 0 && (s - 1) % P != q) {
      const Group& prev = groups[size_t((s - 1) % P)];
      const LinkSpec link = cluster.link(prev.first_chip, g.first_chip);
      const double in_bytes = double(g.rows) * wire_bytes_per_row(m, wire);
      const double out_bytes = double(prev.rows) * wire_bytes_per_row(m, wire);
      // Staged through host memory unless both chips are of one device-direct type.
      const double staged = g.chip->device_direct && prev.chip == g.chip ? 0.0 : 1.0;
      d.set_flight(s, ActionKind::RECV_F, link.seconds(in_bytes));
      d.set(s, ActionKind::RECV_F, staged * host_s(g, in_bytes));
      d.set(s - 1, ActionKind::SEND_F, staged * host_s(prev, out_bytes));
      d.set_flight(s - 1, ActionKind::RECV_B, link.seconds(out_bytes));
      d.set(s - 1, ActionKind::RECV_B, staged * host_s(prev, out_bytes));
      d.set(s, ActionKind::SEND_B, staged * host_s(g, in_bytes));
    }
    // The group's collectives: FSDP gathers the stage's compute copy and reduce-scatters FP32
    // gradients; replicated groups all-reduce gradients. Staged through host memory both ways.
    sc.gather_bytes = sc.params * compute_bytes;
    sc.gradient_bytes = sc.params * 4.0;
    if (plan.fsdp) {
      sc.gather_staging_s = sharded_staging_s(g, sc.gather_bytes);
      sc.reduce_staging_s = sharded_staging_s(g, sc.gradient_bytes);
      // With overlap each unit waits for its own gather while the later ones move (the
      // forward's order; a period that starts with a backward is costed the same way), and the
      // reductions follow the backward (its order: the units reversed).
      std::vector<double> reduce_s(unit_reduce_s.rbegin(), unit_reduce_s.rend());
      std::vector<double> backward_s(sc.unit_last_backward_s.rbegin(),
                                     sc.unit_last_backward_s.rend());
      d.set(s, ActionKind::UNSHARD,
            plan.overlap ? prefetched_gather_s(unit_gather_s, sc.unit_forward_s)
                         : sharded_collective_s(g, sc.gather_bytes));
      d.set(s, ActionKind::REDUCE_GRAD,
            plan.overlap ? overlapped_reduce_s(reduce_s, backward_s)
                         : sharded_collective_s(g, sc.gradient_bytes));
    } else if (g.size > 1) {
      sc.reduce_staging_s = g.chip->device_direct ? 0.0 : host_s(g, 2 * sc.gradient_bytes);
      d.set(s, ActionKind::REDUCE_GRAD,
            ring_s(sc.gradient_bytes, g.size, g.link, 2) + sc.reduce_staging_s);
    }
  }

  const int m_per_replica = plan.micro_batches;
  const double ids_bytes = double(token_bytes(m, plan.micro_batch_rows, 1));
  for (int q = 0; q < P; ++q) {
    const Group& g = groups[size_t(q)];
    PositionCosts& pc = out.positions[size_t(q)];
    double params = 0;
    for (int s = q; s < S; s += P) params += out.stages[size_t(s)].params;
    if (m.tie_embeddings && P > 1 && q == (S - 1) % P) {  // the head's copy of the tied table
      params += double(m.embedding_parameters());
      state[size_t(q)] += unit_state_bytes(m, UnitKind::embedding, in.dtype, g.size, plan.fsdp);
    }
    if (R > 1) {
      pc.replica_bytes = 4.0 * params / (plan.fsdp ? double(g.size) : 1.0);
      pc.replica_link = cluster.link(g.first_chip, chip_of_rank(plan, plan.rank_at({1, q, 0})));
      pc.replica_staging_s = g.chip->device_direct ? 0.0 : host_s(g, 2 * pc.replica_bytes);
    }
    pc.upload_s = host_s(g, double(m_per_replica) * ids_bytes);
    pc.peak_bytes = state[size_t(q)] +
                    peak_activation_bytes(schedule.per_rank[size_t(q)], activations) +
                    transfer_bytes(m, g.rows, in.dtype, plan.wire_dtype, P > 1) +
                    token_bytes(m, plan.micro_batch_rows, m_per_replica);
  }
  return out;
}

PlanEstimate estimate(const Plan& plan, const CostInputs& in, const pipeline::Schedule* lowered) {
  const pipeline::Schedule own = lowered ? pipeline::Schedule{} : plan.lowered_schedule();
  const pipeline::Schedule& schedule = lowered ? *lowered : own;
  const PlanCosts costs = plan_costs(plan, in, schedule);
  const pipeline::Durations& d = costs.durations;
  const int P = plan.positions(), S = plan.stages(), R = plan.replicas;

  PlanEstimate e;
  e.simulation = pipeline::simulate(schedule, d);
  e.pipeline_s = e.simulation.makespan;
  e.bubble = e.simulation.bubble_fraction;
  for (int q = 0; q < P; ++q) {
    const PositionCosts& pc = costs.positions[size_t(q)];
    const int group = plan.group_sizes[size_t(q)];
    const ChipSpec& chip = in.cluster->chip_of(chip_of_rank(plan, plan.rank_at({0, q, 0})));
    PositionEstimate pe{.chip = chip.name,
                        .ranks = group,
                        .peak_bytes = pc.peak_bytes,
                        .capacity_bytes = chip.memory_bytes};
    double last_backward = 0;
    for (int s = q; s < S; s += P) last_backward = std::max(last_backward, d.get(s, ActionKind::B));
    double comm = 0;
    const auto& list = schedule.per_rank[size_t(q)];
    for (size_t i = 0; i < list.size(); ++i) {
      const double span =
          e.simulation.timeline[size_t(q)][i].end - e.simulation.timeline[size_t(q)][i].start;
      if (pipeline::is_compute(list[i].kind))
        pe.busy_s += span;
      else
        comm += span;
    }
    // Replicas sum this rank's gradients (its FSDP shard) while the last backward runs.
    double tail = pc.optimizer_s;
    if (R > 1) {
      const double reduce = ring_s(pc.replica_bytes, R, pc.replica_link, 2) + pc.replica_staging_s;
      tail += std::max(0.0, reduce - last_backward);
      comm += reduce;
    }
    e.tail_s = std::max(e.tail_s, tail);
    e.upload_s = std::max(e.upload_s, pc.upload_s);
    e.comm_s = std::max(e.comm_s, comm);
    e.positions.push_back(pe);
  }
  e.step_s = e.upload_s + e.pipeline_s + e.tail_s;
  return e;
}

}  // namespace h2::parallel::planner
