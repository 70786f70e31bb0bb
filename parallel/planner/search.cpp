// HeteroAuto's two-level search (see search.h; docs/planner.md).
#include "parallel/planner/search.h"

#include <fmt/format.h>

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

// Every layout of the chip types: a non-empty subset of the types (each used wholly), replicas
// dividing each used type's count, per type a group size g and count/(R g) positions, and every
// order of the used types along the pipeline (a type's positions contiguous).
std::vector<Layout> layouts(const Cluster& cluster, int max_positions) {
  const std::vector<std::string> types = cluster.chip_types();
  std::vector<Layout> out;
  const int k = int(types.size());
  for (int mask = 1; mask < (1 << k); ++mask) {
    std::vector<std::string> used;
    for (int t = 0; t < k; ++t)
      if (mask & (1 << t)) used.push_back(types[size_t(t)]);
    int common = 0;
    for (const std::string& t : used) common = std::gcd(common, cluster.count_of(t));
    for (int replicas : divisors(common)) {
      // Per used type, the (positions, group) choices.
      std::vector<std::vector<Stage>> options(used.size());
      std::vector<std::vector<int>> counts(used.size());
      for (size_t i = 0; i < used.size(); ++i) {
        const int chips = cluster.count_of(used[i]) / replicas;
        for (int g : divisors(chips)) {
          options[i].push_back({used[i], g});
          counts[i].push_back(chips / g);
        }
      }
      std::vector<size_t> pick(used.size(), 0);
      while (true) {
        int positions = 0;
        for (size_t i = 0; i < used.size(); ++i) positions += counts[i][pick[i]];
        if (positions <= max_positions) {
          std::vector<size_t> order(used.size());
          std::iota(order.begin(), order.end(), 0);
          do {
            Layout layout{.replicas = replicas};
            for (size_t i : order)
              for (int p = 0; p < counts[i][pick[i]]; ++p)
                layout.positions.push_back(options[i][pick[i]]);
            out.push_back(std::move(layout));
          } while (std::next_permutation(order.begin(), order.end()));
        }
        size_t i = 0;
        while (i < used.size() && ++pick[i] == options[i].size()) pick[i++] = 0;
        if (i == used.size()) break;
      }
    }
  }
  return out;
}

// One outer candidate, complete but for the layer split.
struct Outer {
  Layout layout;
  int64_t rows = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  int chunks = 1;
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
  plan.micro_batch_rows = o.rows;
  plan.fsdp = o.fsdp;
  plan.recompute = o.recompute;
  plan.wire_dtype = o.wire;
  plan.source = "h2 plan";
  return plan;
}

struct Costs {  // per position, per micro-batch
  std::vector<double> block_s, fixed_s;
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
    double per_block = block.forward_s + block.backward_s + (o.recompute ? block.forward_s : 0);
    double fixed = 0;
    if (q == 0) fixed += emb.forward_s + emb.backward_s;
    if (q == P - 1) fixed += head.forward_s + head.backward_s;
    const double host_bw = chip.link_bandwidth / (chip.time_scale * cluster.time_scale);
    const double transfer = double(rows) * double(m.activation_bytes_per_row(wire)) / host_bw;
    fixed += transfer * (double(q > 0) + double(q < P - 1)) * 2;  // staging, both directions
    // The most blocks whose state and activations fit the chip.
    const int64_t block_state = unit_state_bytes(m, UnitKind::block, in.dtype, s.group, o.fsdp);
    int64_t fixed_state = token_bytes(m, o.rows, int(micro_batches)) +
                          transfer_bytes(m, rows, in.dtype, o.wire, P > 1);
    std::vector<UnitCost> fixed_units;
    std::vector<UnitKind> fixed_kinds;
    if (q == 0) {
      fixed_state += unit_state_bytes(m, UnitKind::embedding, in.dtype, s.group, o.fsdp);
      fixed_units.push_back(emb), fixed_kinds.push_back(UnitKind::embedding);
    }
    if (q == P - 1) {
      fixed_state += unit_state_bytes(m, UnitKind::head, in.dtype, s.group, o.fsdp);
      if (m.tie_embeddings && P > 1)
        fixed_state += unit_state_bytes(m, UnitKind::embedding, in.dtype, s.group, o.fsdp);
      fixed_units.push_back(head), fixed_kinds.push_back(UnitKind::head);
    }
    int most = 0;
    for (int b = 1; b <= int(m.n_layers); ++b) {
      std::vector<UnitCost> units = fixed_units;
      std::vector<UnitKind> kinds = fixed_kinds;
      units.insert(units.end(), size_t(b), block);
      kinds.insert(kinds.end(), size_t(b), UnitKind::block);
      const StageActivations stage =
          stage_activations(units, kinds, o.recompute, rows * m.activation_bytes_per_row(in.dtype));
      const int64_t bytes = fixed_state + int64_t(b) * block_state + held[size_t(q)].peak_of(stage);
      if (bytes > chip.memory_bytes) break;
      most = b;
    }
    c.block_s.push_back(per_block);
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

}  // namespace

std::optional<std::vector<int>> split_layers(const SplitProblem& pr) {
  const int P = int(pr.block_s.size()), L = pr.layers;
  if (P == 0 || P > L) return std::nullopt;
  struct Entry {
    double max, sum;
    int prev_layers, prev_index, blocks;
  };
  // front[q][l]: Pareto-optimal (max, sum) of the first q positions holding l blocks.
  std::vector<std::vector<std::vector<Entry>>> front(
      size_t(P + 1), std::vector<std::vector<Entry>>(size_t(L + 1)));
  front[0][0].push_back({0, 0, -1, -1, 0});
  for (int q = 0; q < P; ++q)
    for (int l = 0; l <= L; ++l) {
      const auto& here = front[size_t(q)][size_t(l)];
      for (int e = 0; e < int(here.size()); ++e)
        for (int b = 1; b <= pr.max_blocks[size_t(q)] && l + b <= L - (P - q - 1); ++b) {
          const double c = pr.fixed_s[size_t(q)] + double(b) * pr.block_s[size_t(q)];
          const Entry next{std::max(here[size_t(e)].max, c), here[size_t(e)].sum + c, l, e, b};
          auto& there = front[size_t(q + 1)][size_t(l + b)];
          bool dominated = false;
          for (const Entry& x : there)
            dominated = dominated || (x.max <= next.max && x.sum <= next.sum);
          if (dominated) continue;
          std::erase_if(there,
                        [&](const Entry& x) { return next.max <= x.max && next.sum <= x.sum; });
          there.push_back(next);
        }
    }
  const auto& last = front[size_t(P)][size_t(L)];
  if (last.empty()) return std::nullopt;
  const double m1 = double(pr.micro_batches - 1);
  int best = 0;
  for (int e = 1; e < int(last.size()); ++e) {
    const double f = last[size_t(e)].sum + m1 * last[size_t(e)].max;
    const double g = last[size_t(best)].sum + m1 * last[size_t(best)].max;
    if (f < g || (f == g && last[size_t(e)].max < last[size_t(best)].max)) best = e;
  }
  std::vector<int> blocks(static_cast<size_t>(P));
  int l = L, e = best;
  for (int q = P; q > 0; --q) {
    const Entry& x = front[size_t(q)][size_t(l)][size_t(e)];
    blocks[size_t(q - 1)] = x.blocks;
    e = x.prev_index;
    l = x.prev_layers;
  }
  return blocks;
}

SearchResult search(const Cluster& cluster, const CostInputs& in, const SearchSpace& space) {
  const auto started = std::chrono::steady_clock::now();
  const ModelShape& m = in.model;
  const int L = int(m.n_layers);
  H2_CHECK(space.global_rows >= 1, "a search needs the global batch (rows per step)");
  const int max_positions = space.max_stages > 0 ? std::min(space.max_stages, L) : L;
  const int64_t max_rows =
      space.max_micro_batch_rows > 0 ? space.max_micro_batch_rows : space.global_rows;
  // The outer candidates.
  std::vector<Outer> outers;
  for (const Layout& layout : layouts(cluster, max_positions)) {
    if (space.global_rows % layout.replicas != 0) continue;
    const int64_t per_replica = space.global_rows / layout.replicas;
    int64_t lcm_group = 1;
    bool grouped = false;
    for (const Stage& s : layout.positions) {
      lcm_group = std::lcm(lcm_group, int64_t(s.group));
      grouped = grouped || s.group > 1;
    }
    const int P = int(layout.positions.size());
    for (int64_t rows = 1; rows <= std::min(per_replica, max_rows); ++rows) {
      if (per_replica % rows != 0 || rows % lcm_group != 0) continue;
      const int64_t micro = per_replica / rows;
      for (ScheduleKind schedule : space.schedules) {
        if (P == 1 && schedule != ScheduleKind::k1F1B) continue;
        const bool interleaved = schedule == ScheduleKind::kInterleaved1F1B;
        if (interleaved && (micro % P != 0 || 2 * P > L)) continue;
        for (bool fsdp : {false, true}) {
          if (fsdp && (!space.fsdp || !grouped)) continue;
          for (const std::optional<DType>& wire : space.wires) {
            if (wire && P == 1) continue;
            outers.push_back({layout, rows, schedule, interleaved ? 2 : 1, fsdp, false, wire});
          }
        }
      }
    }
  }
  // Cost them, spread over the cores; each worker keeps its own results, merged in order.
  const int threads =
      std::max(1, space.threads > 0 ? space.threads
                                    : int(std::max(1u, std::thread::hardware_concurrency())));
  std::vector<std::vector<Ranked>> fitting(static_cast<size_t>(threads)),
      too_large(static_cast<size_t>(threads));
  std::vector<int64_t> costed(static_cast<size_t>(threads), 0),
      pruned(static_cast<size_t>(threads), 0);
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](int w) {
    try {
      std::map<std::tuple<int, int, int64_t, int>, std::vector<HeldCounts>> held_cache;
      for (size_t i = next++; i < outers.size(); i = next++) {
        for (bool recompute : {false, true}) {
          if (recompute && !space.recompute) break;
          Outer o = outers[i];
          o.recompute = recompute;
          const int P = int(o.layout.positions.size());
          const int64_t micro = space.global_rows / o.layout.replicas / o.rows;
          const auto key = std::make_tuple(int(o.schedule), P, micro, o.chunks);
          auto found = held_cache.find(key);
          if (found == held_cache.end()) {
            Plan shape;  // the schedule's shape alone decides what each position holds
            shape.group_sizes.assign(size_t(P), 1);
            shape.layout = pipeline::StageLayout::uniform(std::max(L, P * o.chunks), P * o.chunks);
            shape.schedule = o.schedule, shape.chunks = o.chunks;
            shape.micro_batches = int(micro);
            std::vector<HeldCounts> held;
            for (const auto& list : shape.lowered_schedule().per_rank)
              held.push_back(HeldCounts::of(list));
            found = held_cache.emplace(key, std::move(held)).first;
          }
          const Costs c = position_costs(o, micro, found->second, cluster, in);
          std::optional<std::vector<int>> blocks;
          if (o.chunks == 1) {
            blocks = split_layers({L, micro, c.block_s, c.fixed_s, c.max_blocks});
          } else if (L % (P * o.chunks) == 0) {  // interleaved: chunks of equal size
            blocks = std::vector<int>(size_t(P * o.chunks), L / (P * o.chunks));
          }
          if (!blocks) {
            ++pruned[size_t(w)];
            continue;  // try recompute
          }
          Candidate cand{.plan = make_plan(o, cluster, m, *blocks)};
          cand.plan.micro_batches = int(micro);
          cand.estimate = estimate(cand.plan, in);
          cand.tokens_per_s = cand.estimate.tokens_per_s(cand.plan, m);
          ++costed[size_t(w)];
          Ranked r{cand.estimate.step_s,
                   cand.plan.str() + "|" + fmt::format("{}", fmt::join(cand.plan.devices, ",")),
                   std::move(cand)};
          if (r.candidate.estimate.fits()) {
            fitting[size_t(w)].push_back(std::move(r));
            break;  // recompute only where memory needs it
          }
          too_large[size_t(w)].push_back(std::move(r));
        }
      }
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      next = outers.size();
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  SearchResult result;
  result.outer_candidates = int64_t(outers.size());
  std::vector<Ranked> all, large;
  for (int w = 0; w < threads; ++w) {
    result.costed += costed[size_t(w)];
    result.memory_pruned += pruned[size_t(w)];
    for (Ranked& r : fitting[size_t(w)]) all.push_back(std::move(r));
    for (Ranked& r : too_large[size_t(w)]) large.push_back(std::move(r));
  }
  std::sort(all.begin(), all.end());
  std::sort(large.begin(), large.end());
  for (size_t i = 0; i < all.size() && int(i) < space.keep; ++i)
    result.best.push_back(std::move(all[i].candidate));
  for (size_t i = 0; i < large.size() && i < 3; ++i)
    result.too_large.push_back(std::move(large[i].candidate));
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

std::string explain(const Candidate& best, const Candidate& other, const CostInputs& in) {
  const PlanEstimate& a = best.estimate;
  const PlanEstimate& b = other.estimate;
  std::vector<std::pair<double, std::string>> reasons;  // (seconds lost, why)
  reasons.emplace_back(
      b.pipeline_s * b.bubble - a.pipeline_s * a.bubble,
      fmt::format("more pipeline bubble ({:.1f}% vs {:.1f}%)", 100 * b.bubble, 100 * a.bubble));
  reasons.emplace_back(b.comm_s - a.comm_s,
                       fmt::format("more communication on its busiest rank ({:.1f} vs {:.1f} ms)",
                                   1e3 * b.comm_s, 1e3 * a.comm_s));
  reasons.emplace_back(b.tail_s - a.tail_s,
                       fmt::format("a longer optimizer and replica-reduction tail ({:.1f} vs "
                                   "{:.1f} ms)",
                                   1e3 * b.tail_s, 1e3 * a.tail_s));
  double busiest_a = 0, busiest_b = 0;
  std::string slow_chip;
  for (const auto& p : a.positions) busiest_a = std::max(busiest_a, p.busy_s);
  for (const auto& p : b.positions)
    if (p.busy_s > busiest_b) busiest_b = p.busy_s, slow_chip = p.chip;
  reasons.emplace_back(busiest_b - busiest_a,
                       fmt::format("a slower bottleneck ({} busy {:.1f} vs {:.1f} ms per step)",
                                   slow_chip, 1e3 * busiest_b, 1e3 * busiest_a));
  if (other.plan.recompute && !best.plan.recompute)
    reasons.emplace_back(1e9, "it needs recomputation to fit its chips' memory");
  if (other.plan.world_size() < best.plan.world_size())
    reasons.emplace_back(1e8, fmt::format("it leaves {} chips idle",
                                          best.plan.world_size() - other.plan.world_size()));
  std::sort(reasons.begin(), reasons.end(), std::greater<>());
  std::string out = fmt::format("{:+.1f}% step time: ", 100 * (b.step_s / a.step_s - 1));
  int said = 0;
  for (const auto& [lost, why] : reasons) {
    if (lost <= 0 || said == 2) break;
    out += (said++ ? "; " : "") + why;
  }
  if (said == 0) out += "no single cause (small differences everywhere)";
  (void)in;
  return out;
}

}  // namespace h2::parallel::planner
