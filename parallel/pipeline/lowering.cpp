// Lowering passes: transfers, FSDP gather/free periods and gradient reductions (lowering.h).
#include "parallel/pipeline/lowering.h"

#include <limits>
#include <map>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

// The first action of `kinds` in the schedule, for error messages; "" when there is none.
std::string first_of(const Schedule& s, std::initializer_list<ActionKind> kinds) {
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    for (size_t i = 0; i < s.per_rank[r].size(); ++i) {
      for (ActionKind k : kinds) {
        if (s.per_rank[r][i].kind == k) {
          return fmt::format("rank {} index {}: {}", r, i, to_string(s.per_rank[r][i]));
        }
      }
    }
  }
  return "";
}

Schedule with_same_shape(const Schedule& s) {
  s.check_shape();
  Schedule out = s;
  for (auto& list : out.per_rank) list.clear();
  return out;
}

// One rank's unsharded periods: which compute actions (by their order among the rank's compute
// actions) open a period with UNSHARD and which close it with RESHARD.
struct Periods {
  std::vector<bool> unshard_before;
  std::vector<bool> reshard_after;
};

Periods plan_periods(const std::vector<Action>& compute, const UnshardOptions& opt) {
  const size_t n = compute.size();
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> next_same(n, kNever);  // next compute of the same stage
  std::map<int, size_t> later;
  for (size_t j = n; j-- > 0;) {
    auto it = later.find(compute[j].stage);
    if (it != later.end()) next_same[j] = it->second;
    later[compute[j].stage] = j;
  }
  auto group = [&](const Action& a) {
    return std::pair{a.kind == ActionKind::F, a.microbatch / opt.group_size};
  };
  Periods p{std::vector<bool>(n, false), std::vector<bool>(n, false)};
  std::map<int, size_t> active;  // unsharded stage -> its latest compute
  for (size_t j = 0; j < n; ++j) {
    const int s = compute[j].stage;
    if (!active.contains(s)) {
      if (opt.max_active_stages > 0 &&
          active.size() >= static_cast<size_t>(opt.max_active_stages)) {
        // Evict the stage used again furthest in the future (Belady), right after its last use.
        auto victim = active.begin();
        for (auto it = active.begin(); it != active.end(); ++it) {
          if (next_same[it->second] > next_same[victim->second]) victim = it;
        }
        p.reshard_after[victim->second] = true;
        active.erase(victim);
      }
      p.unshard_before[j] = true;
    }
    active[s] = j;
    const size_t nj = next_same[j];
    const bool last_use = nj == kNever;
    const bool group_done =
        opt.group_size > 0 && !last_use && nj != j + 1 && group(compute[nj]) != group(compute[j]);
    if (last_use || group_done) {
      p.reshard_after[j] = true;
      active.erase(s);
    }
  }
  return p;
}

}  // namespace

Schedule add_send_recv(const Schedule& s) {
  const std::string existing =
      first_of(s, {ActionKind::SEND_F, ActionKind::RECV_F, ActionKind::SEND_B, ActionKind::RECV_B});
  H2_CHECK(existing.empty(), "add_send_recv: the schedule already has transfers ({})", existing);
  Schedule out = with_same_shape(s);
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    auto remote = [&](int stage) {
      return stage >= 0 && stage < s.stages && s.rank_of(stage) != static_cast<int>(r);
    };
    auto& list = out.per_rank[r];
    for (const Action& a : s.per_rank[r]) {
      const int st = a.stage;
      const int mb = a.microbatch;
      const bool fwd = a.kind == ActionKind::F;
      const bool bwd = a.kind == ActionKind::B || a.kind == ActionKind::I;
      if (fwd && remote(st - 1)) list.push_back(Action::comm(ActionKind::RECV_F, st, mb, st - 1));
      if (bwd && remote(st + 1)) list.push_back(Action::comm(ActionKind::RECV_B, st, mb, st + 1));
      list.push_back(a);
      if (fwd && remote(st + 1)) list.push_back(Action::comm(ActionKind::SEND_F, st, mb, st + 1));
      if (bwd && remote(st - 1)) list.push_back(Action::comm(ActionKind::SEND_B, st, mb, st - 1));
    }
  }
  return out;
}

Schedule add_unshard_reshard(const Schedule& s, const UnshardOptions& options) {
  H2_CHECK(options.max_active_stages >= 0, "max_active_stages = {} must not be negative",
           options.max_active_stages);
  H2_CHECK(options.group_size >= 0, "group_size = {} must not be negative", options.group_size);
  const std::string existing = first_of(s, {ActionKind::UNSHARD, ActionKind::RESHARD});
  H2_CHECK(existing.empty(), "add_unshard_reshard: the schedule already has UNSHARD/RESHARD ({})",
           existing);
  Schedule out = with_same_shape(s);
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    std::vector<Action> compute;
    for (const Action& a : s.per_rank[r]) {
      if (is_compute(a.kind)) compute.push_back(a);
    }
    const Periods p = plan_periods(compute, options);
    auto& list = out.per_rank[r];
    size_t j = 0;
    for (const Action& a : s.per_rank[r]) {
      if (!is_compute(a.kind)) {
        list.push_back(a);
        continue;
      }
      if (p.unshard_before[j]) list.push_back(Action::stage_wide(ActionKind::UNSHARD, a.stage));
      list.push_back(a);
      if (p.reshard_after[j]) list.push_back(Action::stage_wide(ActionKind::RESHARD, a.stage));
      ++j;
    }
  }
  return out;
}

Schedule add_reduce_grad(const Schedule& s) {
  const std::string existing = first_of(s, {ActionKind::REDUCE_GRAD});
  H2_CHECK(existing.empty(), "add_reduce_grad: the schedule already has REDUCE_GRAD ({})",
           existing);
  Schedule out = with_same_shape(s);
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    const auto& in = s.per_rank[r];
    std::map<int, size_t> last_backward;  // stage -> position of its last B/I/W
    for (size_t i = 0; i < in.size(); ++i) {
      if (is_backward(in[i].kind)) last_backward[in[i].stage] = i;
    }
    for (size_t i = 0; i < in.size(); ++i) {
      out.per_rank[r].push_back(in[i]);
      auto it = last_backward.find(in[i].stage);
      if (it != last_backward.end() && it->second == i) {
        out.per_rank[r].push_back(Action::stage_wide(ActionKind::REDUCE_GRAD, in[i].stage));
      }
    }
  }
  return out;
}

Schedule lower(const Schedule& schedule, const LoweringOptions& options) {
  Schedule s = schedule;
  if (options.fsdp) s = add_unshard_reshard(s, options.unshard);
  if (options.reduce_grad) s = add_reduce_grad(s);
  if (options.send_recv) s = add_send_recv(s);
  return s;
}

}  // namespace h2::parallel::pipeline
