// A pipeline schedule as compute and transfer tasks (see schedule_graph.h).
#include "parallel/sim/schedule_graph.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"
#include "parallel/pipeline/replay.h"
#include "parallel/pipeline/segments.h"

namespace h2::parallel::sim {

namespace {

using pipeline::ActionKind;

// Adds one schedule's tasks; the replay (pipeline/replay.h) calls action() in an order where
// every producer came first, so every dependency is a task already added and each chip's
// computes follow its position's list.
class Builder {
 public:
  Builder(TaskGraph& graph, ScheduleGraph& out, const pipeline::Schedule& schedule,
          const pipeline::Durations& durations, const std::vector<std::vector<int>>& groups,
          int64_t rows, const TransferBytes& bytes, const std::vector<StageUnits>& units,
          const Topology* topology)
      : graph_(graph),
        out_(out),
        schedule_(schedule),
        durations_(durations),
        groups_(groups),
        rows_(rows),
        bytes_(bytes),
        units_(units),
        topology_(topology),
        pending_(schedule.per_rank.size()),
        reducing_(schedule.per_rank.size()),
        last_backward_(schedule.per_rank.size()) {
    for (size_t q = 0; q < schedule.per_rank.size(); ++q) find_last_backwards(q);
  }

  void action(size_t q, size_t index, std::span<const pipeline::Position> producers) {
    const pipeline::Action& a = schedule_.per_rank[q][index];
    const std::vector<int>& chips = groups_[q];
    const bool overlapped = overlaps(a.stage) && chips.size() > 1;
    const bool gathered = pending_[q].count(a.stage) > 0 && pipeline::is_compute(a.kind);
    const bool reduces = overlapped && last_backward_[q].count(index) > 0;
    std::vector<std::vector<TaskId>> unit_done(chips.size());  // per chip, per unit
    for (size_t k = 0; k < chips.size(); ++k) {
      std::vector<TaskId> after = dependencies(q, index, k, producers);
      TaskId& end = out_.action_task[q][index][k];
      if (gathered || reduces)
        end = unit_by_unit(q, index, k, std::move(after), gathered, unit_done[k]);
      else
        end = compute(q, index, chips[k], durations_.get(a.stage, a.kind), std::move(after));
    }
    if (gathered) pending_[q].erase(a.stage);
    if (reduces) post_unit_reductions(q, index, unit_done);
    if (chips.size() == 1) return;
    if (a.kind == ActionKind::UNSHARD) {
      if (overlapped)
        post_unit_gathers(q, index, units_[size_t(a.stage)], pending_[q][a.stage]);
      else
        exchange_whole(q, index, bytes_(a.stage, a.kind));
    } else if (a.kind == ActionKind::REDUCE_GRAD) {
      if (overlapped)
        join_reductions(q, index);
      else
        exchange_whole(q, index, bytes_(a.stage, a.kind));
    }
  }

 private:
  // Per chip of the group, per unit: the stream of the unit's gather that ends into the chip.
  using UnitPieces = std::vector<std::vector<TaskId>>;

  bool overlaps(int stage) const { return size_t(stage) < units_.size(); }

  TaskId compute(size_t q, size_t index, int chip, double seconds, std::vector<TaskId> after) {
    const TaskId id = graph_.compute(chip, seconds, std::move(after));
    graph_.tag(id, action_tag(q, index));
    return id;
  }

  // Per REDUCE_GRAD of an overlapped stage, the index of the stage's last B or W before it: the
  // backward that posts the units' reductions.
  void find_last_backwards(size_t q) {
    const auto& list = schedule_.per_rank[q];
    for (size_t r = 0; r < list.size(); ++r) {
      if (list[r].kind != ActionKind::REDUCE_GRAD || !overlaps(list[r].stage)) continue;
      for (size_t i = r; i-- > 0;) {
        if (list[i].stage != list[r].stage) continue;
        if (list[i].kind == ActionKind::B || list[i].kind == ActionKind::W) {
          last_backward_[q][i] = r;
          break;
        }
      }
    }
  }

  // What chip k of position q waits for before action `index`: its producers' tasks, through
  // transfers of its rows where a producer is another group's receive.
  std::vector<TaskId> dependencies(size_t q, size_t index, size_t k,
                                   std::span<const pipeline::Position> producers) {
    const pipeline::Action& a = schedule_.per_rank[q][index];
    const std::vector<int>& chips = groups_[q];
    std::vector<TaskId> after;
    for (const pipeline::Position& p : producers) {
      const auto& from = out_.action_task[size_t(p.rank)][p.index];
      if (size_t(p.rank) == q) {  // this group: the same chip's rows
        after.push_back(from[k]);
        continue;
      }
      // Another group: its chips that hold some of this chip's rows. A receive moves those rows
      // from each (a schedule without transfers hands them over for free).
      const std::vector<int>& senders = groups_[size_t(p.rank)];
      const auto [lo, hi] = pipeline::group_rows(rows_, int64_t(k), int64_t(chips.size()));
      for (size_t j = 0; j < senders.size(); ++j) {
        const auto [slo, shi] = pipeline::group_rows(rows_, int64_t(j), int64_t(senders.size()));
        const int64_t overlap = std::min(hi, shi) - std::max(lo, slo);
        if (overlap <= 0) continue;
        if (!pipeline::is_recv(a.kind)) {
          after.push_back(from[j]);
          continue;
        }
        const double piece = bytes_(a.stage, a.kind) * double(overlap) / double(rows_);
        const TaskId moved = graph_.transfer(senders[j], chips[k], piece, {from[j]});
        out_.transfer_tasks[q][index][k].push_back(moved);
        after.push_back(moved);
      }
    }
    return after;
  }

  // Runs action `index` on chip k of position q one unit at a time (a backward in reverse unit
  // order), each unit after its gathered parameters (`gathered`); `done` gets each unit's task
  // (by unit). Returns the last unit's task.
  TaskId unit_by_unit(size_t q, size_t index, size_t k, std::vector<TaskId> after, bool gathered,
                      std::vector<TaskId>& done) {
    const pipeline::Action& a = schedule_.per_rank[q][index];
    const StageUnits& units = units_.at(size_t(a.stage));
    const bool backward = !(a.kind == ActionKind::F);
    const std::vector<double>& weight = backward ? units.last_backward_s : units.forward_s;
    const size_t n = weight.size();
    const double total = durations_.get(a.stage, a.kind);
    const double sum = std::accumulate(weight.begin(), weight.end(), 0.0);
    done.assign(n, -1);
    TaskId last = -1;
    for (size_t step = 0; step < n; ++step) {
      const size_t u = backward ? n - 1 - step : step;
      if (gathered) after.push_back(pending_[q].at(a.stage)[k][u]);
      const double share = sum > 0 ? weight[u] / sum : 1.0 / double(n);
      last = done[u] = compute(q, index, groups_[q][k], total * share, std::move(after));
      after.clear();
    }
    return last;
  }

  // A collective of `bytes` over position q's group once every chip is ready (`ready`, per
  // chip): each chip streams the (g - 1) / g of the bytes an all-gather or reduce-scatter moves
  // through every chip's ports to the next chip of the group, one flow per chip where the
  // runtime posts g - 1 pieces per chip: on a non-blocking switch, the same time, with 1/(g - 1)
  // of the flows; device-direct groups over several nodes move it in two levels (see the
  // header). Returns, per chip, a task that ends once everything streaming into it is in.
  std::vector<TaskId> group_streams(size_t q, const std::vector<TaskId>& ready, double bytes) {
    const std::vector<int>& chips = groups_[q];
    const size_t g = chips.size();
    const TaskId all_ready = graph_.delay(0.0, ready);
    std::vector<std::vector<TaskId>> into(g);
    const std::vector<std::vector<size_t>> nodes = two_level_nodes(q);
    if (nodes.empty()) {
      for (size_t j = 0; j < g; ++j)
        into[(j + 1) % g].push_back(graph_.transfer(
            chips[j], chips[(j + 1) % g], bytes * double(g - 1) / double(g), {all_ready}));
    } else {
      const size_t N = nodes.size(), L = nodes[0].size();
      for (size_t n = 0; n < N; ++n)
        for (size_t l = 0; l < L; ++l) {
          const size_t j = nodes[n][l], across = nodes[(n + 1) % N][l];
          const size_t along = nodes[n][(l + 1) % L];
          into[across].push_back(graph_.transfer(
              chips[j], chips[across], bytes * double(N - 1) / double(N) / double(L), {all_ready}));
          if (L > 1)
            into[along].push_back(graph_.transfer(chips[j], chips[along],
                                                  bytes * double(L - 1) / double(L), {all_ready}));
        }
    }
    std::vector<TaskId> arrived(g);
    for (size_t k = 0; k < g; ++k)
      arrived[k] = into[k].size() == 1 ? into[k][0] : graph_.delay(0.0, std::move(into[k]));
    return arrived;
  }

  // The group's chips (indices into it) by node, for a two-level collective: only where the
  // topology is known, every chip is device-direct and the group spans several nodes with as
  // many of its chips on each; else empty (one ring).
  std::vector<std::vector<size_t>> two_level_nodes(size_t q) const {
    const std::vector<int>& chips = groups_[q];
    if (topology_ == nullptr || chips.size() < 2) return {};
    std::vector<int> node_ids;
    std::vector<std::vector<size_t>> nodes;
    for (size_t k = 0; k < chips.size(); ++k) {
      if (!topology_->device_direct(chips[k])) return {};
      const int node = topology_->node_of(chips[k]);
      const auto at = std::find(node_ids.begin(), node_ids.end(), node);
      if (at == node_ids.end()) {
        node_ids.push_back(node);
        nodes.push_back({k});
      } else {
        nodes[size_t(at - node_ids.begin())].push_back(k);
      }
    }
    if (nodes.size() < 2) return {};
    for (const auto& n : nodes)
      if (n.size() != nodes[0].size()) return {};
    return nodes;
  }

  // The reductions the last backward posts: per unit, in the order the units finished, each
  // chip stages the unit's gradients once the unit is done and its previous stream has left,
  // then the group's streams move them.
  void post_unit_reductions(size_t q, size_t index,
                            const std::vector<std::vector<TaskId>>& unit_done) {
    const pipeline::Action& a = schedule_.per_rank[q][index];
    const StageUnits& units = units_[size_t(a.stage)];
    const size_t g = groups_[q].size(), n = units.reduce_bytes.size();
    auto& into = reducing_[q][last_backward_.at(q).at(index)];
    into.assign(g, {});
    std::vector<TaskId> sent(g, -1);  // per chip: its last stream
    for (size_t step = 0; step < n; ++step) {
      const size_t u = a.kind == ActionKind::F ? step : n - 1 - step;
      std::vector<TaskId> staged(g);
      for (size_t j = 0; j < g; ++j) {
        std::vector<TaskId> after{unit_done[j][u]};
        if (sent[j] >= 0) after.push_back(sent[j]);
        staged[j] = graph_.delay(units.reduce_staging_s[u], std::move(after));
      }
      const std::vector<TaskId> streams = group_streams(q, staged, units.reduce_bytes[u]);
      for (size_t k = 0; k < g; ++k) {
        into[k].push_back(streams[k]);
        sent[k] = streams[k];  // the unit is through chip k's ports
      }
    }
  }

  // REDUCE_GRAD of an overlapped stage ends on each chip once its own work there and every
  // unit's pieces sent to it are done.
  void join_reductions(size_t q, size_t index) {
    const std::vector<int>& chips = groups_[q];
    auto& into = reducing_[q][index];
    into.resize(chips.size());
    for (size_t k = 0; k < chips.size(); ++k) {
      TaskId& end = out_.action_task[q][index][k];
      out_.transfer_tasks[q][index][k] = into[k];
      std::vector<TaskId> after = into[k];
      after.push_back(end);
      end = compute(q, index, chips[k], 0.0, std::move(after));
    }
    reducing_[q].erase(index);
  }

  // UNSHARD of an overlapped stage: each chip, once it reaches the action, stages each unit's
  // share after its previous stream has left, and the group's streams move the unit; the action
  // itself ends at once.
  void post_unit_gathers(size_t q, size_t index, const StageUnits& units, UnitPieces& arriving) {
    const std::vector<TaskId>& posted = out_.action_task[q][index];
    const size_t g = groups_[q].size(), n = units.gather_bytes.size();
    arriving.assign(g, std::vector<TaskId>(n));
    std::vector<TaskId> sent = posted;  // per chip: what its next staging waits for
    for (size_t u = 0; u < n; ++u) {
      std::vector<TaskId> staged(g);
      for (size_t j = 0; j < g; ++j) staged[j] = graph_.delay(units.gather_staging_s[u], {sent[j]});
      const std::vector<TaskId> streams = group_streams(q, staged, units.gather_bytes[u]);
      for (size_t k = 0; k < g; ++k) {
        arriving[k][u] = streams[k];
        out_.transfer_tasks[q][index][k].push_back(streams[k]);
        sent[k] = streams[k];
      }
    }
  }

  // A group collective moved whole: the task each chip ran there (the action's own duration,
  // e.g. staging) ends when it is ready, the group's streams move the bytes, and a zero-length
  // task per chip ends the action once its stream is in.
  void exchange_whole(size_t q, size_t index, double bytes) {
    const std::vector<int>& chips = groups_[q];
    std::vector<TaskId>& ends = out_.action_task[q][index];
    const std::vector<TaskId> posted = ends;
    const std::vector<TaskId> streams = group_streams(q, posted, bytes);
    for (size_t k = 0; k < chips.size(); ++k) {
      out_.transfer_tasks[q][index][k].push_back(streams[k]);
      ends[k] = compute(q, index, chips[k], 0.0, {streams[k], posted[k]});
    }
  }

  TaskGraph& graph_;
  ScheduleGraph& out_;
  const pipeline::Schedule& schedule_;
  const pipeline::Durations& durations_;
  const std::vector<std::vector<int>>& groups_;
  int64_t rows_;
  const TransferBytes& bytes_;
  const std::vector<StageUnits>& units_;
  const Topology* topology_;  // may be null: every group collective one ring
  // Per position: gathers posted and not yet consumed (by stage), reductions in flight (by
  // their REDUCE_GRAD's index: per receiving chip, the pieces), and the last backwards (their
  // index -> their REDUCE_GRAD's index).
  std::vector<std::map<int, UnitPieces>> pending_;
  std::vector<std::map<size_t, std::vector<std::vector<TaskId>>>> reducing_;
  std::vector<std::map<size_t, size_t>> last_backward_;
};

}  // namespace

ScheduleGraph schedule_graph(const pipeline::Schedule& schedule,
                             const pipeline::Durations& durations,
                             const std::vector<std::vector<int>>& groups, int64_t rows,
                             const TransferBytes& bytes, const std::vector<StageUnits>& units,
                             const Topology* topology) {
  ScheduleGraph out;
  TaskGraph graph;
  add_schedule(graph, out, schedule, durations, groups, rows, bytes, units, topology);
  out.graph = std::move(graph);
  return out;
}

void add_schedule(TaskGraph& graph, ScheduleGraph& out, const pipeline::Schedule& schedule,
                  const pipeline::Durations& durations, const std::vector<std::vector<int>>& groups,
                  int64_t rows, const TransferBytes& bytes, const std::vector<StageUnits>& units,
                  const Topology* topology) {
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
  for (size_t s = 0; s < units.size(); ++s) {
    const StageUnits& u = units[s];
    const size_t n = u.forward_s.size();
    H2_CHECK(n > 0 && u.last_backward_s.size() == n && u.gather_bytes.size() == n &&
                 u.reduce_bytes.size() == n && u.gather_staging_s.size() == n &&
                 u.reduce_staging_s.size() == n,
             "stage {}'s units: {} forwards, {} backwards, {} gathers, {} reductions, {} and {} "
             "stagings",
             s, n, u.last_backward_s.size(), u.gather_bytes.size(), u.reduce_bytes.size(),
             u.gather_staging_s.size(), u.reduce_staging_s.size());
  }
  H2_CHECK(positions < (size_t(1) << (31 - kActionIndexBits)), "{} positions", positions);
  out.action_task.clear();
  out.transfer_tasks.clear();
  out.action_task.resize(positions);
  out.transfer_tasks.resize(positions);
  for (size_t q = 0; q < positions; ++q) {
    const size_t n = schedule.per_rank[q].size();
    H2_CHECK(n < (size_t(1) << kActionIndexBits), "{} actions at position {}", n, q);
    out.action_task[q].assign(n, std::vector<TaskId>(groups[q].size(), -1));
    out.transfer_tasks[q].assign(n, std::vector<std::vector<TaskId>>(groups[q].size()));
  }
  Builder builder(graph, out, schedule, durations, groups, rows, bytes, units, topology);
  const pipeline::ReplayOutcome outcome = pipeline::replay(
      schedule, [&](int rank, size_t index, std::span<const pipeline::Position> producers) {
        builder.action(size_t(rank), index, producers);
      });
  if (!outcome.finished)
    H2_THROW(Error, "schedule_graph: the schedule deadlocks: {}",
             pipeline::describe_deadlock(schedule, outcome));
}

}  // namespace h2::parallel::sim
