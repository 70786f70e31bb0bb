// Schedule validator: the six checks listed in validator.h, each collecting messages.
#include "parallel/pipeline/validator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <map>
#include <set>

#include "core/error.h"
#include "parallel/pipeline/replay.h"

namespace h2::parallel::pipeline {
namespace {

using Positions = std::vector<size_t>;

class Checker {
 public:
  Checker(const Schedule& schedule, const ValidateOptions& options, ValidationReport& report)
      : s_(schedule), opt_(options), report_(report) {}

  bool well_formed() {
    const size_t before = report_.errors.size();
    for_each([&](int r, size_t i, const Action& a) { check_action(r, i, a); });
    return report_.errors.size() == before;
  }

  void computes() {
    // (stage, micro-batch) -> positions of its F, B, I, W (all on the stage's rank).
    std::map<std::pair<int, int>, std::array<Positions, 4>> seen;
    for_each([&](int, size_t i, const Action& a) {
      if (is_compute(a.kind))
        seen[{a.stage, a.microbatch}][static_cast<size_t>(a.kind)].push_back(i);
    });
    for (int st = 0; st < s_.stages; ++st) {
      for (int mb = 0; mb < s_.microbatches; ++mb) check_passes(st, mb, seen[{st, mb}]);
    }
  }

  void transfers() {
    if (!s_.has_comm()) return;
    std::map<Action, Positions> where;  // transfer -> positions on its rank
    for_each([&](int, size_t i, const Action& a) {
      if (is_comm(a.kind)) where[a].push_back(i);
    });
    for (const auto& [a, positions] : where) {
      const int r = s_.rank_of(a.stage);
      for (size_t k = 1; k < positions.size(); ++k) {
        error(r, positions[k], "{} duplicates index {}", to_string(a), positions[0]);
      }
      const Action mate = matching(a);
      if (!where.contains(mate)) {
        error(r, positions[0], "{} has no matching {} on rank {}", to_string(a), to_string(mate),
              s_.rank_of(mate.stage));
      }
    }
    for_each([&](int r, size_t i, const Action& a) { check_compute_transfers(r, i, a, where); });
  }

  void deadlock() {
    ReplayOutcome out = replay(s_, [](int, size_t, auto) {});
    for (size_t r = 0; r < out.next.size(); ++r) {
      if (out.next[r] >= s_.per_rank[r].size()) continue;
      error(static_cast<int>(r), out.next[r], "deadlock: {}",
            describe_stuck(s_, out, static_cast<int>(r)));
    }
  }

  void fsdp() {
    bool any = false;
    for_each([&](int, size_t, const Action& a) {
      any |= a.kind == ActionKind::UNSHARD || a.kind == ActionKind::RESHARD;
    });
    if (!any) return;
    for (int r = 0; r < s_.ranks; ++r) fsdp_rank(r);
  }

  void reduce_grad() {
    std::map<int, Positions> reduce;      // stage -> REDUCE_GRAD positions
    std::map<int, size_t> last_backward;  // stage -> position of its last B/I/W
    for_each([&](int, size_t i, const Action& a) {
      if (a.kind == ActionKind::REDUCE_GRAD) reduce[a.stage].push_back(i);
      if (is_backward(a.kind)) last_backward[a.stage] = i;
    });
    if (reduce.empty()) return;
    for (int st = 0; st < s_.stages; ++st) {
      const int r = s_.rank_of(st);
      const Positions& at = reduce[st];
      if (at.empty()) {
        error(r, -1, "missing REDUCE_GRAD{}: stage {} never reduces its gradients", st, st);
        continue;
      }
      for (size_t k = 1; k < at.size(); ++k) {
        error(r, at[k], "REDUCE_GRAD{} duplicates index {}", st, at[0]);
      }
      auto last = last_backward.find(st);
      if (last != last_backward.end() && at[0] < last->second) {
        error(r, at[0], "REDUCE_GRAD{} comes before {} at index {}, the stage's last backward", st,
              to_string(s_.per_rank[static_cast<size_t>(r)][last->second]), last->second);
      }
    }
  }

 private:
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (size_t r = 0; r < s_.per_rank.size(); ++r) {
      const auto& list = s_.per_rank[r];
      for (size_t i = 0; i < list.size(); ++i) fn(static_cast<int>(r), i, list[i]);
    }
  }

  template <typename... Args>
  void error(int rank, long index, fmt::format_string<Args...> f, Args&&... args) {
    std::string where = rank < 0    ? std::string()
                        : index < 0 ? fmt::format("rank {}: ", rank)
                                    : fmt::format("rank {} index {}: ", rank, index);
    report_.errors.push_back(
        {rank, static_cast<int>(index), where + fmt::format(f, std::forward<Args>(args)...)});
  }

  void check_action(int r, size_t i, const Action& a) {
    const std::string text = to_string(a);
    if (a.stage < 0 || a.stage >= s_.stages) {
      return error(r, i, "{}: stage {} outside [0, {})", text, a.stage, s_.stages);
    }
    if (s_.rank_of(a.stage) != r) {
      return error(r, i, "{}: stage {} lives on rank {}, not on rank {}", text, a.stage,
                   s_.rank_of(a.stage), r);
    }
    if (is_stage_wide(a.kind)) {
      if (a.microbatch != -1 || a.peer != -1) {
        error(r, i, "{}: a stage-wide action takes no micro-batch or peer", text);
      }
      return;
    }
    if (a.microbatch < 0 || a.microbatch >= s_.microbatches) {
      return error(r, i, "{}: micro-batch {} outside [0, {})", text, a.microbatch, s_.microbatches);
    }
    if (is_compute(a.kind)) {
      if (a.peer != -1) error(r, i, "{}: a compute action takes no peer", text);
      return;
    }
    const bool downstream = a.kind == ActionKind::SEND_F || a.kind == ActionKind::RECV_B;
    const int want = downstream ? a.stage + 1 : a.stage - 1;
    if (a.peer != want || want < 0 || want >= s_.stages) {
      error(r, i, "{}: peer {} is not the {} stage of stage {}", text, a.peer,
            downstream ? "next" : "previous", a.stage);
    }
  }

  void check_passes(int st, int mb, const std::array<Positions, 4>& at) {
    const int r = s_.rank_of(st);
    const auto& f = at[static_cast<size_t>(ActionKind::F)];
    const auto& b = at[static_cast<size_t>(ActionKind::B)];
    const auto& in = at[static_cast<size_t>(ActionKind::I)];
    const auto& w = at[static_cast<size_t>(ActionKind::W)];
    for (ActionKind k : {ActionKind::F, ActionKind::B, ActionKind::I, ActionKind::W}) {
      const Positions& p = at[static_cast<size_t>(k)];
      for (size_t n = 1; n < p.size(); ++n) {
        error(r, p[n], "{} duplicates index {}", to_string(Action::compute(k, st, mb)), p[0]);
      }
    }
    if (f.empty())
      error(r, -1, "missing F{}.{}: stage {} never runs micro-batch {}", st, mb, st, mb);
    if (b.empty() && in.empty() && w.empty()) {
      error(r, -1, "missing B{}.{}: stage {} has no backward (B, or I and W) for micro-batch {}",
            st, mb, st, mb);
    } else if (!b.empty() && (!in.empty() || !w.empty())) {
      error(r, b[0], "B{}.{} mixes a full backward with a split one (I/W)", st, mb);
    } else if (b.empty() && in.empty()) {
      error(r, w[0], "missing I{}.{}: W{}.{} has no input-gradient pass", st, mb, st, mb);
    } else if (b.empty() && w.empty()) {
      error(r, in[0], "missing W{}.{}: I{}.{} has no weight-gradient pass", st, mb, st, mb);
    }
    const Positions& bwd = b.empty() ? in : b;
    if (!f.empty() && !bwd.empty() && bwd[0] < f[0]) {
      error(r, bwd[0], "{}{}.{} runs before its F{}.{} at index {}", b.empty() ? "I" : "B", st, mb,
            st, mb, f[0]);
    }
    if (!in.empty() && !w.empty() && w[0] < in[0]) {
      error(r, w[0], "W{}.{} runs before its I{}.{} at index {}", st, mb, st, mb, in[0]);
    }
  }

  static Action matching(const Action& a) {
    ActionKind k = a.kind;
    switch (a.kind) {
      case ActionKind::SEND_F:
        k = ActionKind::RECV_F;
        break;
      case ActionKind::RECV_F:
        k = ActionKind::SEND_F;
        break;
      case ActionKind::SEND_B:
        k = ActionKind::RECV_B;
        break;
      case ActionKind::RECV_B:
        k = ActionKind::SEND_B;
        break;
      default:
        break;
    }
    return Action::comm(k, a.peer, a.microbatch, a.stage);
  }

  // A compute action next to a remote stage needs its receive before it and its send after it.
  void check_compute_transfers(int r, size_t i, const Action& a,
                               const std::map<Action, Positions>& where) {
    auto need = [&](ActionKind kind, int peer, bool before) {
      if (peer < 0 || peer >= s_.stages || s_.rank_of(peer) == r) return;
      const Action t = Action::comm(kind, a.stage, a.microbatch, peer);
      auto it = where.find(t);
      const bool ok = it != where.end() && (before ? it->second[0] < i : it->second[0] > i);
      if (!ok)
        error(r, i, "{} has no {} {} it", to_string(a), to_string(t), before ? "before" : "after");
    };
    if (a.kind == ActionKind::F) {
      need(ActionKind::RECV_F, a.stage - 1, true);
      need(ActionKind::SEND_F, a.stage + 1, false);
    } else if (a.kind == ActionKind::B || a.kind == ActionKind::I) {
      need(ActionKind::RECV_B, a.stage + 1, true);
      need(ActionKind::SEND_B, a.stage - 1, false);
    }
  }

  void fsdp_rank(int r) {
    std::map<int, size_t> unsharded;  // stage -> index of its UNSHARD
    std::map<int, size_t> resharded;  // stage -> index of its latest RESHARD
    const auto& list = s_.per_rank[static_cast<size_t>(r)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const int st = a.stage;
      if (a.kind == ActionKind::UNSHARD) {
        if (unsharded.contains(st)) {
          error(r, i, "UNSHARD{} while stage {} is already unsharded (UNSHARD at index {})", st, st,
                unsharded[st]);
          continue;
        }
        unsharded[st] = i;
        if (opt_.max_active_stages > 0 &&
            unsharded.size() > static_cast<size_t>(opt_.max_active_stages)) {
          std::vector<int> active;
          for (const auto& [stage, at] : unsharded) active.push_back(stage);
          error(r, i, "UNSHARD{} leaves {} stages unsharded ({}), above max_active_stages = {}", st,
                active.size(), fmt::join(active, ", "), opt_.max_active_stages);
        }
      } else if (a.kind == ActionKind::RESHARD) {
        if (unsharded.erase(st) == 0) {
          error(r, i, "RESHARD{} while stage {} is not unsharded", st, st);
        }
        resharded[st] = i;
      } else if (is_compute(a.kind) && !unsharded.contains(st)) {
        auto it = resharded.find(st);
        if (it != resharded.end()) {
          error(r, i,
                "{} uses stage {} after RESHARD{} at index {} (a RESHARD before the stage's "
                "last use)",
                to_string(a), st, st, it->second);
        } else {
          error(r, i, "{} runs before any UNSHARD{}", to_string(a), st);
        }
      }
    }
    for (const auto& [st, at] : unsharded) {
      error(r, -1, "stage {} is never resharded after UNSHARD{} at index {}", st, st, at);
    }
  }

  const Schedule& s_;
  const ValidateOptions& opt_;
  ValidationReport& report_;
};

}  // namespace

std::string ValidationReport::to_string() const {
  std::string text;
  for (const ValidationError& e : errors) text += e.message + "\n";
  return text;
}

ValidationReport validate(const Schedule& schedule, const ValidateOptions& options) {
  ValidationReport report;
  try {
    schedule.check_shape();
  } catch (const Error& e) {
    report.errors.push_back({-1, -1, e.what()});
    return report;
  }
  Checker check(schedule, options, report);
  if (!check.well_formed()) return report;
  check.computes();
  check.transfers();
  check.deadlock();
  check.fsdp();
  check.reduce_grad();
  return report;
}

void check_valid(const Schedule& schedule, const ValidateOptions& options) {
  ValidationReport report = validate(schedule, options);
  if (!report.ok()) {
    H2_THROW(Error, "invalid pipeline schedule ({} problems):\n{}", report.errors.size(),
             report.to_string());
  }
}

}  // namespace h2::parallel::pipeline
