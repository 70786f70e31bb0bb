// HeteroAuto's two-level search (see search.h; docs/planner.md).
#include "parallel/planner/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "parallel/planner/memory_model.h"
#include "parallel/planner/search_shapes.h"

namespace h2::parallel::planner {
namespace {

using pipeline::ScheduleKind;

struct Stage {  // one schedule position: a group of chips of one type
  std::string chip;
  int group = 1;
};

// The outer level's layout: replicas and the positions of one replica, in pipeline order.
struct Layout {
  int replicas = 1;
  std::vector<Stage> positions;
};

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// One outer candidate, complete but for the layer split.
struct Outer {
  Layout layout;
  int64_t rows = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int chunks = 1;
  int lead = 0;
  bool fsdp = false;
  bool recompute = false;
  std::optional<DType> wire;
};

// Job ranks onto cluster chips: replica-major, each position's group taking the next chips of
// its type in cluster order (so a group sits on one node where it can).
std::vector<std::string> assign_devices(const Cluster& cluster, const Layout& layout) {
  std::map<std::string, std::vector<int>> free;
  for (int c = cluster.size() - 1; c >= 0; --c) free[cluster.chip_of(c).name].push_back(c);
  std::vector<std::string> devices;
  for (int r = 0; r < layout.replicas; ++r)
    for (const Stage& s : layout.positions)
      for (int k = 0; k < s.group; ++k) {
        std::vector<int>& chips = free[s.chip];
        devices.push_back(fmt::format("vchip:{}", chips.back()));
        chips.pop_back();
      }
  return devices;
}

Plan make_plan(const Outer& o, const Cluster& cluster, const ModelShape& model,
               const std::vector<int>& blocks) {
  Plan plan;
  for (const Stage& s : o.layout.positions) plan.group_sizes.push_back(s.group);
  plan.devices = assign_devices(cluster, o.layout);
  plan.replicas = o.layout.replicas;
  plan.layout = pipeline::StageLayout::from_block_counts(blocks, int(model.n_layers));
  plan.schedule = o.schedule;
  plan.chunks = o.chunks;
  plan.lead = o.lead;
  plan.micro_batch_rows = o.rows;
  plan.fsdp = o.fsdp;
  plan.recompute = o.recompute;
  plan.wire_dtype = o.wire;
  plan.source = "h2 plan";
  return plan;
}

struct Costs {  // per position, per micro-batch
  std::vector<double> block_s, fixed_s;
  // The least a rank is busy per block and for its fixed units: F with the cheaper of B and
  // I + W (ZB-H1 runs the backward as I and W), a bound of what any schedule costs it.
  std::vector<double> least_block_s, least_fixed_s;
  std::vector<int> max_blocks;
};

// The inner problem of an outer candidate: costs from the profiles, the memory limit per
// position from the memory model (memory_model.h), given what the schedule holds per position.
Costs position_costs(const Outer& o, int64_t micro_batches, const std::vector<HeldCounts>& held,
                     const Cluster& cluster, const CostInputs& in) {
  const ModelShape& m = in.model;
  const int P = int(o.layout.positions.size());
  const DType wire = o.wire.value_or(in.dtype);
  Costs c;
  for (int q = 0; q < P; ++q) {
    const Stage& s = o.layout.positions[size_t(q)];
    const ChipSpec& chip = cluster.chip(s.chip);
    const ChipProfile& profile = in.profiles->of(s.chip);
    const int64_t rows = o.rows / s.group;
    const UnitCost block = profile.cost(UnitKind::block, rows);
    const UnitCost emb = profile.cost(UnitKind::embedding, rows);
    const UnitCost head = profile.cost(UnitKind::head, rows);
    const double redo = o.recompute ? block.forward_s : 0;
    const double per_block = block.forward_s + block.backward_s + redo;
    auto least = [](const UnitCost& u) {
      return u.forward_s + std::min(u.backward_s, u.input_s + u.weight_s);
    };
    double fixed = 0, least_fixed = 0;
    if (q == 0) fixed += emb.forward_s + emb.backward_s, least_fixed += least(emb);
    if (q == P - 1) fixed += head.forward_s + head.backward_s, least_fixed += least(head);
    const double host_bw = chip.link_bandwidth / (chip.time_scale * cluster.time_scale);
    const double transfer = double(rows) * double(m.activation_bytes_per_row(wire)) / host_bw;
    const double staging = transfer * (double(q > 0) + double(q < P - 1)) * 2;  // both ways
    fixed += staging;
    least_fixed += staging;
    // The most blocks whose state and activations fit the chip.
    const int64_t block_state = unit_state_bytes(m, UnitKind::block, in.dtype, s.group, o.fsdp);
    int64_t fixed_state = token_bytes(m, o.rows, int(micro_batches)) +
                          transfer_bytes(m, rows, in.dtype, o.wire, P > 1);
    // The stage's units in pipeline order: the embedding, b blocks, the head. Memory grows with
    // b, so the most blocks that fit is found by bisection.
    auto bytes_with = [&](int b) {
      std::vector<UnitCost> units;
      std::vector<UnitKind> kinds;
      if (q == 0) units.push_back(emb), kinds.push_back(UnitKind::embedding);
      units.insert(units.end(), size_t(b), block);
      kinds.insert(kinds.end(), size_t(b), UnitKind::block);
      if (q == P - 1) units.push_back(head), kinds.push_back(UnitKind::head);
      const StageActivations stage =
          stage_activations(units, kinds, o.recompute, rows * m.activation_bytes_per_row(in.dtype));
      return fixed_state + int64_t(b) * block_state + held[size_t(q)].peak_of(stage);
    };
    if (q == 0) fixed_state += unit_state_bytes(m, UnitKind::embedding, in.dtype, s.group, o.fsdp);
    if (q == P - 1) {
      fixed_state += unit_state_bytes(m, UnitKind::head, in.dtype, s.group, o.fsdp);
      if (m.tie_embeddings && P > 1)
        fixed_state += unit_state_bytes(m, UnitKind::embedding, in.dtype, s.group, o.fsdp);
    }
    int most = 0, too_many = int(m.n_layers) + 1;  // bytes_with(most) fits, too_many does not
    const int64_t usable = usable_bytes(chip.memory_bytes);
    if (bytes_with(1) > usable)
      too_many = 1;
    else
      most = 1;
    while (too_many - most > 1) {
      const int mid = (most + too_many) / 2;
      (bytes_with(mid) > usable ? too_many : most) = mid;
    }
    c.block_s.push_back(per_block);
    c.least_block_s.push_back(least(block) + redo);
    c.least_fixed_s.push_back(least_fixed);
    c.fixed_s.push_back(fixed);
    c.max_blocks.push_back(most);
  }
  return c;
}

struct Ranked {
  double step_s;
  std::string key;
  Candidate candidate;
  bool operator<(const Ranked& o) const {
    return step_s != o.step_s ? step_s < o.step_s : key < o.key;
  }
};

// A class of outer candidates: the chip types taking part, the replicas, each type's group
// size and the micro-batch rows; its members differ in the order of the types, the schedule,
// FSDP, the wire dtype, recomputation and the layer split. The bound is a lower bound of the
// cost model's step time for every member (docs/planner.md, "Search at scale"): a rank's busy
// time is at least its blocks' F + B per micro-batch, so the pipeline takes at least the fluid
// split's m L / sum_q 1 / c_q, and micro-batch 0 passes every layer forward and back once, at
// least L min_q (f_q + i_q).
struct Class {
  std::vector<std::string> types;  // in the cluster's order
  std::vector<int> groups;         // per type
  std::vector<int> positions;      // per type, per replica
  int replicas = 1;
  int64_t rows = 1;
  double bound = 0;
  double guess = 0;  // the bound with a 1F1B bubble, (m + P - 1) / m: the order of expansion
  std::string key;   // ties broken by it, so the order is total
};

double class_bound(const Class& k, const CostInputs& in, int64_t micro) {
  double rate = 0, chain = std::numeric_limits<double>::infinity();
  for (size_t t = 0; t < k.types.size(); ++t) {
    const UnitCost c = in.profiles->of(k.types[t]).cost(UnitKind::block, k.rows / k.groups[t]);
    const double busy = c.forward_s + std::min(c.backward_s, c.input_s + c.weight_s);
    rate += double(k.positions[t]) / busy;
    chain = std::min(chain, c.forward_s + std::min(c.backward_s, c.input_s));
  }
  const double L = double(in.model.n_layers);
  return std::max(double(micro) * L / rate, L * chain);
}

// Every class of the cluster whose positions a pipeline of at most `max_positions` holds and
// whose chips can hold the model, most promising first.
std::vector<Class> classes(const Cluster& cluster, const CostInputs& in, const SearchSpace& space,
                           int max_positions, int64_t max_rows, int64_t& memory_pruned) {
  const std::vector<std::string> types = cluster.chip_types();
  const int n = int(types.size());
  std::vector<Class> out;
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<std::string> used;
    for (int t = 0; t < n; ++t)
      if (mask & (1 << t)) used.push_back(types[size_t(t)]);
    int common = 0;
    for (const std::string& t : used) common = std::gcd(common, cluster.count_of(t));
    for (int replicas : divisors(common)) {
      if (space.global_rows % replicas != 0) continue;
      const int64_t per_replica = space.global_rows / replicas;
      std::vector<std::vector<int>> options(used.size());
      for (size_t i = 0; i < used.size(); ++i)
        options[i] = divisors(cluster.count_of(used[i]) / replicas);
      std::vector<size_t> pick(used.size(), 0);
      while (true) {
        Class k{.types = used, .replicas = replicas};
        int P = 0;
        int64_t lcm_group = 1;
        for (size_t i = 0; i < used.size(); ++i) {
          const int g = options[i][pick[i]];
          k.groups.push_back(g);
          k.positions.push_back(cluster.count_of(used[i]) / replicas / g);
          P += k.positions.back();
          lcm_group = std::lcm(lcm_group, int64_t(g));
        }
        if (P <= max_positions)
          for (int64_t rows = lcm_group; rows <= std::min(per_replica, max_rows);
               rows += lcm_group) {
            // Fewer micro-batches than positions never fill the pipeline, and rows per rank
            // beyond a profile's largest measured size would be extrapolated: neither is
            // searched.
            if (per_replica % rows != 0 || per_replica / rows < P) continue;
            bool measured = true;
            for (size_t i = 0; i < used.size(); ++i)
              measured = measured &&
                         rows / k.groups[i] <= in.profiles->of(used[i]).by_rows.rbegin()->first;
            if (!measured) continue;
            k.rows = rows;
            // Memory bound: each position holds, per block, at least the block's state (FSDP
            // wherever its group can shard) and one micro-batch's block input (recomputation);
            // the blocks the positions can hold so must reach L.
            int64_t holdable = 0;
            for (size_t i = 0; i < used.size(); ++i) {
              const int g = k.groups[i];
              const int64_t per_block =
                  unit_state_bytes(in.model, UnitKind::block, in.dtype, g, space.fsdp && g > 1) +
                  rows / g * in.model.activation_bytes_per_row(in.dtype);
              holdable += int64_t(k.positions[i]) *
                          (usable_bytes(cluster.chip(used[i]).memory_bytes) / per_block);
            }
            if (holdable < in.model.n_layers) {
              ++memory_pruned;
              continue;
            }
            const int64_t micro = per_replica / rows;
            k.bound = class_bound(k, in, micro);
            k.guess = k.bound * double(micro + P - 1) / double(micro);
            k.key = fmt::format("{}|{}|{}|{}", fmt::join(used, ","), fmt::join(k.groups, ","),
                                replicas, rows);
            out.push_back(k);
          }
        size_t i = 0;
        while (i < used.size() && ++pick[i] == options[i].size()) pick[i++] = 0;
        if (i == used.size()) break;
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Class& a, const Class& b) {
    return a.guess != b.guess ? a.guess < b.guess : a.key < b.key;
  });
  return out;
}

// What expanding classes found: fitting and too-large candidates and the counts.
struct Found {
  std::vector<Ranked> fitting, too_large;
  int64_t outers = 0, costed = 0, memory_pruned = 0;
};

// Small split problems are solved exhaustively under the full cost model (so small searches
// are exact), larger ones by the surrogate's dynamic program.
constexpr int64_t kExhaustiveSplits = 16;

// Every member of class `k`: each order of its types, schedule (1f1b with each lead), FSDP, wire
// and (where memory needs it) recomputation, with its best layer split.
// Members whose busiest position alone (its compute and staging per micro-batch, m times)
// exceeds `threshold` are not costed.
void expand(const Class& k, const Cluster& cluster, const CostInputs& in, const SearchSpace& space,
            double threshold, ShapeCache& cache, Found& found) {
  const ModelShape& m = in.model;
  const int L = int(m.n_layers);
  const int64_t micro = space.global_rows / k.replicas / k.rows;
  bool grouped = false;
  for (int g : k.groups) grouped = grouped || g > 1;
  std::vector<size_t> order(k.types.size());
  std::iota(order.begin(), order.end(), 0);
  do {
    Outer o{.layout = {.replicas = k.replicas}, .rows = k.rows};
    for (size_t i : order)
      for (int p = 0; p < k.positions[i]; ++p)
        o.layout.positions.push_back({k.types[i], k.groups[i]});
    const int P = int(o.layout.positions.size());
    for (const auto& [schedule, lead] : schedule_choices(space, P, micro)) {
      const bool interleaved = schedule == ScheduleKind::kInterleaved1F1B;
      if (interleaved && (micro % P != 0 || L % (2 * P) != 0)) continue;
      for (bool fsdp : {false, true}) {
        if (fsdp && (!space.fsdp || !grouped)) continue;
        for (const std::optional<DType>& wire : space.wires) {
          if (wire && (P == 1 || *wire == in.dtype)) continue;
          o.schedule = schedule, o.chunks = interleaved ? 2 : 1, o.lead = lead;
          o.fsdp = fsdp, o.wire = wire;
          ++found.outers;
          bool fitted = false, bounded = false;
          for (bool recompute : {false, true}) {
            if (recompute && !space.recompute) break;
            o.recompute = recompute;
            const ShapeCache::Shape& shape =
                cache.of(o.schedule, P, micro, o.chunks, o.lead, o.fsdp);
            const Costs c = position_costs(o, micro, shape.held, cluster, in);
            std::vector<std::vector<int>> splits;
            if (o.chunks > 1) {
              splits.push_back(std::vector<int>(size_t(P * o.chunks), L / (P * o.chunks)));
            } else {
              const SplitProblem problem{L, micro, c.block_s, c.fixed_s, c.max_blocks};
              if (auto all = all_splits(problem, kExhaustiveSplits)) {
                splits = std::move(*all);
              } else if (auto best = split_layers(problem)) {
                splits.push_back(std::move(*best));
              }
            }
            if (splits.empty()) continue;  // memory: try recompute
            std::optional<Ranked> best;
            for (const std::vector<int>& blocks : splits) {
              if (o.chunks == 1) {
                double busiest = 0;
                for (size_t q = 0; q < blocks.size(); ++q)
                  busiest = std::max(busiest,
                                     c.least_fixed_s[q] + double(blocks[q]) * c.least_block_s[q]);
                if (double(micro) * busiest > threshold) continue;
              }
              Candidate cand{.plan = make_plan(o, cluster, m, blocks)};
              cand.plan.micro_batches = int(micro);
              cand.estimate = estimate(cand.plan, in, &shape.lowered);
              cand.tokens_per_s = cand.estimate.tokens_per_s(cand.plan, m);
              ++found.costed;
              Ranked r{cand.estimate.step_s, "", std::move(cand)};
              if (best && best->candidate.estimate.fits() && !r.candidate.estimate.fits()) continue;
              if (best && best->candidate.estimate.fits() == r.candidate.estimate.fits() &&
                  !(r.step_s < best->step_s))
                continue;
              best = std::move(r);
            }
            if (!best) {
              bounded = true;
              break;
            }
            best->key = best->candidate.plan.str() + "|" +
                        fmt::format("{}", fmt::join(best->candidate.plan.devices, ","));
            if (best->candidate.estimate.fits()) {
              found.fitting.push_back(std::move(*best));
              fitted = true;
              break;  // recompute only where memory needs it
            }
            found.too_large.push_back(std::move(*best));
          }
          if (!fitted && !bounded) ++found.memory_pruned;
        }
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

}  // namespace

SearchResult search(const Cluster& cluster, const CostInputs& in, const SearchSpace& space) {
  const auto started = std::chrono::steady_clock::now();
  const ModelShape& m = in.model;
  const int L = int(m.n_layers);
  H2_CHECK(space.global_rows >= 1, "a search needs the global batch (rows per step)");
  H2_CHECK(space.keep >= 1, "a search keeps at least one plan");
  const int max_positions = space.max_stages > 0 ? std::min(space.max_stages, L) : L;
  const int64_t max_rows =
      space.max_micro_batch_rows > 0 ? space.max_micro_batch_rows : space.global_rows;
  SearchResult result;
  const std::vector<Class> all =
      classes(cluster, in, space, max_positions, max_rows, result.memory_pruned);

  // Branch and bound over the classes, most promising first, a batch at a time: a class whose
  // bound exceeds the keep-th best step time found before its batch cannot hold one of the best
  // plans, and once every remaining class's bound does, the search is complete. Batches of a
  // fixed size make the expanded set (and so every count) the same on any number of threads.
  // A budget of classes may stop it earlier; the result then says how far from the optimum
  // the best plan can be at most.
  const int threads =
      std::max(1, space.threads > 0 ? space.threads
                                    : int(std::max(1u, std::thread::hardware_concurrency())));
  constexpr size_t batch = 8;
  std::vector<double> least_bound(all.size() + 1, std::numeric_limits<double>::infinity());
  for (size_t i = all.size(); i-- > 0;) least_bound[i] = std::min(least_bound[i + 1], all[i].bound);
  std::vector<Ranked> fitting, too_large;
  result.classes = int64_t(all.size());
  double threshold = std::numeric_limits<double>::infinity();
  size_t first = 0;
  while (first < all.size()) {
    if (least_bound[first] > threshold) break;  // no remaining class can do better
    if (space.max_classes > 0 && result.classes_expanded >= space.max_classes) break;
    size_t last = std::min(all.size(), first + batch);
    if (space.max_classes > 0)  // the budget counts classes, not batches
      last = std::min(last, first + size_t(space.max_classes - result.classes_expanded));
    std::vector<Found> found(last - first);
    std::atomic<size_t> next{first};
    std::mutex error_mutex;
    std::exception_ptr error;
    auto work = [&] {
      ShapeCache cache;
      try {
        for (size_t i = next++; i < last; i = next++)
          if (all[i].bound <= threshold)
            expand(all[i], cluster, in, space, threshold, cache, found[i - first]);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = last;
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < std::min(threads, int(last - first)); ++w) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    for (size_t i = first; i < last; ++i) {
      Found& f = found[i - first];
      if (all[i].bound <= threshold) ++result.classes_expanded;
      result.outer_candidates += f.outers;
      result.costed += f.costed;
      result.memory_pruned += f.memory_pruned;
      for (Ranked& r : f.fitting) fitting.push_back(std::move(r));
      for (Ranked& r : f.too_large) too_large.push_back(std::move(r));
    }
    std::sort(fitting.begin(), fitting.end());
    if (fitting.size() > size_t(space.keep)) fitting.resize(size_t(space.keep));
    std::sort(too_large.begin(), too_large.end());
    if (too_large.size() > 3) too_large.resize(3);
    if (fitting.size() == size_t(space.keep)) threshold = fitting.back().step_s;
    first = last;
  }
  if (first < all.size() && least_bound[first] <= threshold) {  // stopped by the budget
    result.complete = false;
    result.optimality_gap = fitting.empty()
                                ? std::numeric_limits<double>::infinity()
                                : std::max(0.0, fitting.front().step_s / least_bound[first] - 1);
  }
  for (Ranked& r : fitting) result.best.push_back(std::move(r.candidate));
  for (Ranked& r : too_large) result.too_large.push_back(std::move(r.candidate));
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace h2::parallel::planner
