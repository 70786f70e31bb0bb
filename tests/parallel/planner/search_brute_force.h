// A brute force of the plan search (parallel/planner/search.h), written from its documented
// space, for search_test.cpp and search_bound_test.cpp; and the random small jobs both run it on.
//
// The space: every non-empty set of chip types (each type wholly), replicas R dividing every used
// type's count and the global rows, a group size per type dividing its count / R, the types in
// every order along the pipeline, positions P <= max_stages (0: the layers) and <= the layers;
// micro-batch rows a multiple of every group size, dividing the rows per replica, at most
// max_micro_batch_rows, with micro-batches per replica m >= P and rows per rank within each
// used type's largest profiled size (never extrapolated); every schedule (one position:
// 1F1B only; on several, 1F1B with each of the space's leads whose warm-up (P - 1)(1 + lead),
// at most m, differs from the previous lead's; interleaved-1F1B with 2 chunks of L / 2P blocks only
// when m % P == 0 and L % 2P == 0); FSDP where a group has several chips; each wire dtype except
// one equal to the compute dtype (and none on one position); recomputation only where no split fits
// without it. Each such outer configuration is priced over every layer split (each position 1..
// blocks) with estimate() (cost_model.h), keeping the fastest split that fits.
//
// A plan fits when estimate() says so (every peak within the chip's usable memory,
// memory_model.h). Classes (chip set, groups, replicas, rows) are ruled out by memory as the
// search documents it: when sum over positions of floor(usable memory / (a block's state, FSDP
// where the group can shard, + one micro-batch's block input)) < L. The tests check that no
// class so ruled out has a plan.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "parallel/planner/memory_model.h"
#include "parallel/planner/search.h"
#include "tests/parallel/planner/planner_test_model.h"

namespace h2::parallel::planner::brute {

using pipeline::ScheduleKind;
constexpr double kInf = std::numeric_limits<double>::infinity();

using test::Job;
using test::model;

struct JobKind {
  int min_chips = 2, max_chips = 4;
  int64_t memory = 0;  // the chips' capacity; 0: random, from below the class bound to ample
  // Compute alone (fast links, light embedding, head and optimizer, more micro-batches), so that
  // the search's class bounds come close to the step times they bound.
  bool tight = false;
  // ZB-H1's input and weight passes adding up to less than the backward (else at least it).
  bool cheap_split_backward = false;
};

// A cluster of min_chips..max_chips chips of 1-3 types on 1-2 nodes each, links from slow to
// fast, 2-6 layers, random profiles (heavy or light embedding and head, small or large stashes),
// a random search space.
inline Job random_job(std::mt19937& rng, const JobKind& kind) {
  const bool tight = kind.tight;
  const int64_t memory = kind.memory;
  Job job;
  std::uniform_real_distribution<double> unit(0, 1);
  const int chips = kind.min_chips + int(rng() % unsigned(kind.max_chips - kind.min_chips + 1));
  const int types = 1 + int(rng() % unsigned(std::min(3, chips)));
  std::vector<int> count(size_t(types), 1);
  for (int c = types; c < chips; ++c) ++count[rng() % unsigned(types)];
  const int64_t capacity = memory > 0 ? memory : int64_t(std::exp(std::log(4e4) + 3.5 * unit(rng)));
  for (int t = 0; t < types; ++t) {
    const std::string name = std::string("chip-") + char('a' + t);
    ChipSpec chip{
        .name = name,
        .count = count[size_t(t)],
        .memory_bytes = memory > 0 ? memory : int64_t(double(capacity) * (0.7 + unit(rng))),
        .memory_bandwidth = 1e9,
        .link_bandwidth = (tight ? 1e10 : 1e7) * (1 + 9 * unit(rng)),
        .time_scale = double(1 + rng() % 2)};
    job.cluster.chips.push_back(chip);
    // Links from far slower than the compute (gradient reductions dominate, and the class
    // bounds, which count compute only, mislead the order of expansion) to far faster.
    std::uniform_real_distribution<double> bw(std::log(tight ? 1e10 : 1e3),
                                              std::log(tight ? 1e11 : 1e8)),
        lat(tight ? 1e-8 : 1e-5, tight ? 1e-7 : 2e-3);
    job.cluster.intra_node[name] = {std::exp(bw(rng)), lat(rng)};
    job.cluster.inter_node[name] = {std::exp(bw(rng)), lat(rng)};
    job.cluster.cross_type[name] = {std::exp(bw(rng)), lat(rng)};
    const int first = count[size_t(t)] >= 2 && rng() % 2 ? 1 : count[size_t(t)];
    job.cluster.nodes.push_back({name, first});
    if (first < count[size_t(t)]) job.cluster.nodes.push_back({name, count[size_t(t)] - first});
    ChipProfile& p = job.profiles.by_chip[name];
    p.key.chip = name;
    const double speed = 0.5 + 2.5 * unit(rng);
    const double input = kind.cheap_split_backward ? 0.4 + 0.2 * unit(rng) : 0.5 + 0.3 * unit(rng);
    const double weight =
        kind.cheap_split_backward ? 0.1 + 0.2 * unit(rng) : 1 - input + 0.3 * unit(rng);
    const double ends = tight ? 0.001 : rng() % 2 ? 1 : 0.02;  // light embedding and head
    const int64_t block_stash = rng() % 2 ? 4000 : 40000;      // large: recomputation pays
    for (int64_t rows : {1, 2, 4, 8}) {
      auto cost = [&](double f, double b, int64_t stash, int64_t workspace) {
        const double n = double(rows) * speed * (0.9 + 0.2 * unit(rng));
        return UnitCost{.forward_s = f * n,
                        .backward_s = b * n,
                        .input_s = input * b * n,
                        .weight_s = weight * b * n,
                        .optimizer_s = (tight ? 1e-5 : 0.01) * f * speed,
                        .stash_bytes = stash * rows,
                        .forward_workspace_bytes = workspace * rows,
                        .workspace_bytes = 2 * workspace * rows,
                        .deferred_bytes = stash * rows / 3};
      };
      p.by_rows[rows] = {cost(0.01 * ends, 0.02 * ends, 600, 400),
                         cost(0.1, 0.2, block_stash, 3000),
                         cost(0.05 * ends, 0.08 * ends, 2000, 9000)};
    }
  }
  std::shuffle(job.cluster.nodes.begin(), job.cluster.nodes.end(), rng);
  job.cluster.time_scale = rng() % 2 ? 1.0 : 1.5;
  job.m = model(2 + int(rng() % 5));
  const int64_t rows[] = {2, 4, 6, 8, 12, 16, 24};
  job.space.global_rows = rows[rng() % 5 + (tight ? 2 : 0)];
  if (rng() % 4 == 0) job.space.max_stages = 1 + int(rng() % 3);
  if (rng() % 4 == 0) job.space.max_micro_batch_rows = 1 + int64_t(rng() % 4);
  if (rng() % 4 == 0) job.space.leads = {int(rng() % 3)};
  if (rng() % 3 == 0) job.space.wires = {std::nullopt, DType::f32, DType::bf16, DType::f8e4m3};
  if (rng() % 5 == 0) job.space.fsdp = false;
  if (rng() % 5 == 0) job.space.recompute = false;
  if (rng() % 4 == 0) {  // a random non-empty subset of the schedules
    std::vector<ScheduleKind> some;
    for (ScheduleKind s : job.space.schedules)
      if (rng() % 2) some.push_back(s);
    if (!some.empty()) job.space.schedules = some;
  }
  job.space.threads = 2;
  job.space.keep = 100000;  // every plan: no bound cuts anything
  return job;
}

struct Position {
  std::string chip;
  int group = 1;
};

// Replica-major; each group takes the next chips of its type in cluster order.
inline std::vector<std::string> devices(const Cluster& c, const std::vector<Position>& positions,
                                        int replicas) {
  std::map<std::string, int> taken;
  std::vector<std::string> out;
  for (int r = 0; r < replicas; ++r)
    for (const Position& p : positions)
      for (int k = 0; k < p.group; ++k) {
        int seen = 0;
        for (int i = 0; i < c.size(); ++i)
          if (c.chip_of(i).name == p.chip && seen++ == taken[p.chip]) {
            out.push_back("vchip:" + std::to_string(i));
            break;
          }
        ++taken[p.chip];
      }
  return out;
}

inline std::vector<std::vector<int>> compositions(int layers, int parts) {
  std::vector<std::vector<int>> out;
  std::vector<int> b(size_t(parts), 0);
  std::function<void(int, int)> place = [&](int q, int left) {
    if (q == parts - 1) {
      b[size_t(q)] = left;
      if (left >= 1) out.push_back(b);
      return;
    }
    for (int k = 1; k <= left - (parts - q - 1); ++k) b[size_t(q)] = k, place(q + 1, left - k);
  };
  place(0, layers);
  return out;
}

inline std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

struct Outer {
  double best = kInf;       // the fastest fitting split, recomputing only where none fits without
  double any = kInf;        // the fastest fitting split with or without recomputation
  int64_t costed = 0;       // splits the search prices: those that fit, or the interleaved one
  bool split_fits = false;  // some split fits, with recomputation where allowed
  bool interleaved = false;
};

struct Class {
  std::string key;
  bool ruled_out = false;  // by the documented class memory bound
  std::vector<Outer> outers;
};

struct Result {
  std::vector<Class> classes;
  // Over the classes not ruled out: what the search must report with an unbounded keep.
  // memory_pruned: ruled-out classes and configurations no split fits; interleaved_unfit: those
  // of them that interleave.
  int64_t kept = 0, outers = 0, costed = 0, memory_pruned = 0, interleaved_unfit = 0;
  std::vector<double> steps;  // each outer's best, fastest first
  double optimum = kInf;      // steps.front()
  double any = kInf;          // the fastest over every split, recomputing or not
};

inline Outer cost_outer(const Job& job, const std::vector<Position>& pos, int replicas,
                        int64_t rows, ScheduleKind schedule, int lead, bool fsdp,
                        std::optional<DType> wire) {
  const int P = int(pos.size()), L = int(job.m.n_layers);
  Outer out;
  out.interleaved = schedule == ScheduleKind::kInterleaved1F1B;
  const std::vector<std::vector<int>> splits =
      out.interleaved ? std::vector<std::vector<int>>{std::vector<int>(size_t(2 * P), L / (2 * P))}
                      : compositions(L, P);
  for (bool recompute : {false, true}) {
    if (recompute && !job.space.recompute) break;
    int64_t fitting = 0;
    double best = kInf;
    for (const std::vector<int>& blocks : splits) {
      Plan plan;
      for (const Position& p : pos) plan.group_sizes.push_back(p.group);
      plan.devices = devices(job.cluster, pos, replicas);
      plan.replicas = replicas;
      plan.layout = pipeline::StageLayout::from_block_counts(blocks, L);
      plan.schedule = schedule, plan.chunks = out.interleaved ? 2 : 1, plan.lead = lead;
      plan.micro_batches = int(job.space.global_rows / replicas / rows);
      plan.micro_batch_rows = rows;
      plan.fsdp = fsdp, plan.recompute = recompute, plan.wire_dtype = wire;
      const PlanEstimate e = estimate(plan, job.inputs());
      if (!e.fits()) continue;
      ++fitting;
      best = std::min(best, e.step_s);
    }
    out.any = std::min(out.any, best);
    if (out.best < kInf) continue;  // recomputation only where nothing fits without it
    out.costed += out.interleaved ? 1 : fitting;
    out.best = best;
    out.split_fits = out.split_fits || fitting > 0;
  }
  return out;
}

inline Result brute_force(const Job& job) {
  Result res;
  const SearchSpace& space = job.space;
  const std::vector<std::string> types = job.cluster.chip_types();
  const int L = int(job.m.n_layers), T = int(types.size());
  const int max_positions = space.max_stages > 0 ? std::min(space.max_stages, L) : L;
  const int64_t max_rows =
      space.max_micro_batch_rows > 0 ? space.max_micro_batch_rows : space.global_rows;
  for (int mask = 1; mask < (1 << T); ++mask) {
    std::vector<std::string> used;
    for (int t = 0; t < T; ++t)
      if (mask >> t & 1) used.push_back(types[size_t(t)]);
    for (int R = 1; R <= job.cluster.size(); ++R) {
      bool divides = space.global_rows % R == 0;
      for (const std::string& t : used) divides = divides && job.cluster.count_of(t) % R == 0;
      if (!divides) continue;
      // Every group size per used type.
      std::vector<std::vector<int>> choices = {{}};
      for (const std::string& t : used) {
        std::vector<std::vector<int>> longer;
        for (const std::vector<int>& c : choices)
          for (int g : divisors(job.cluster.count_of(t) / R)) {
            longer.push_back(c);
            longer.back().push_back(g);
          }
        choices = longer;
      }
      for (const std::vector<int>& group : choices) {
        int P = 0;
        bool grouped = false;
        for (size_t i = 0; i < used.size(); ++i) {
          P += job.cluster.count_of(used[i]) / R / group[i];
          grouped = grouped || group[i] > 1;
        }
        if (P > max_positions) continue;
        const int64_t per_replica = space.global_rows / R;
        for (int64_t rows = 1; rows <= std::min(per_replica, max_rows); ++rows) {
          bool ok = per_replica % rows == 0 && per_replica / rows >= P;
          for (size_t i = 0; i < used.size(); ++i)
            ok = ok && rows % group[i] == 0 &&
                 rows / group[i] <= job.profiles.of(used[i]).by_rows.rbegin()->first;
          if (!ok) continue;
          const int64_t micro = per_replica / rows;
          Class k{.key =
                      std::to_string(mask) + "|" + std::to_string(R) + "|" + std::to_string(rows)};
          int64_t holdable = 0;
          for (size_t i = 0; i < used.size(); ++i) {
            const int g = group[i];
            k.key.append(1, '|').append(std::to_string(g));
            const int64_t per_block =
                unit_state_bytes(job.m, UnitKind::block, DType::f32, g, space.fsdp && g > 1) +
                rows / g * job.m.activation_bytes_per_row(DType::f32);
            holdable += int64_t(job.cluster.count_of(used[i]) / R / g) *
                        (usable_bytes(job.cluster.chip(used[i]).memory_bytes) / per_block);
          }
          k.ruled_out = holdable < L;
          std::vector<size_t> order(used.size());
          std::iota(order.begin(), order.end(), 0);
          do {
            std::vector<Position> pos;
            for (size_t i : order)
              for (int n = 0; n < job.cluster.count_of(used[i]) / R / group[i]; ++n)
                pos.push_back({used[i], group[i]});
            for (ScheduleKind s : space.schedules) {
              if (P == 1 && s != ScheduleKind::k1F1B) continue;
              if (s == ScheduleKind::kInterleaved1F1B && (micro % P != 0 || L % (2 * P) != 0))
                continue;
              std::vector<int> leads = {0};
              if (s == ScheduleKind::k1F1B && P > 1) {
                leads.clear();
                for (int lead : space.leads) {
                  const auto warmup = [&](int l) {
                    return std::min<int64_t>((P - 1) * (1 + l), micro);
                  };
                  if (leads.empty() || warmup(lead) != warmup(leads.back())) leads.push_back(lead);
                }
              }
              for (int lead : leads)
                for (bool fsdp : {false, true}) {
                  if (fsdp && (!space.fsdp || !grouped)) continue;
                  for (std::optional<DType> wire : space.wires)
                    if (!wire || (P > 1 && *wire != DType::f32))
                      k.outers.push_back(cost_outer(job, pos, R, rows, s, lead, fsdp, wire));
                }
            }
          } while (std::next_permutation(order.begin(), order.end()));
          res.classes.push_back(std::move(k));
        }
      }
    }
  }
  for (const Class& k : res.classes) {
    if (k.ruled_out) {
      ++res.memory_pruned;
      continue;
    }
    ++res.kept;
    for (const Outer& o : k.outers) {
      ++res.outers;
      res.costed += o.costed;
      res.memory_pruned += o.split_fits ? 0 : 1;
      res.interleaved_unfit += o.split_fits || !o.interleaved ? 0 : 1;
      if (o.best < kInf) res.steps.push_back(o.best);
      res.any = std::min(res.any, o.any);
    }
  }
  std::sort(res.steps.begin(), res.steps.end());
  if (!res.steps.empty()) res.optimum = res.steps.front();
  return res;
}

}  // namespace h2::parallel::planner::brute
