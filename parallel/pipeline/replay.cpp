// Dependency replay: the ready rule of replay.h applied round by round over the ranks.
#include "parallel/pipeline/replay.h"

#include <fmt/format.h>

#include <map>

namespace h2::parallel::pipeline {

std::vector<Action> data_dependencies(const Schedule& schedule, const Action& a, bool lowered) {
  const int s = a.stage;
  const int mb = a.microbatch;
  auto remote = [&](int other) {
    return lowered && schedule.rank_of(other) != schedule.rank_of(s);
  };
  std::vector<Action> deps;
  switch (a.kind) {
    case ActionKind::F:
      if (s > 0) {
        deps.push_back(remote(s - 1) ? Action::comm(ActionKind::RECV_F, s, mb, s - 1)
                                     : Action::compute(ActionKind::F, s - 1, mb));
      }
      break;
    case ActionKind::B:
    case ActionKind::I:
      deps.push_back(Action::compute(ActionKind::F, s, mb));
      if (s + 1 < schedule.stages) {
        deps.push_back(remote(s + 1) ? Action::comm(ActionKind::RECV_B, s, mb, s + 1)
                                     : Action::compute(ActionKind::I, s + 1, mb));
      }
      break;
    case ActionKind::W:
      deps.push_back(Action::compute(ActionKind::I, s, mb));
      break;
    case ActionKind::SEND_F:
      deps.push_back(Action::compute(ActionKind::F, s, mb));
      break;
    case ActionKind::SEND_B:
      deps.push_back(Action::compute(ActionKind::I, s, mb));
      break;
    case ActionKind::RECV_F:
      deps.push_back(Action::comm(ActionKind::SEND_F, a.peer, mb, s));
      break;
    case ActionKind::RECV_B:
      deps.push_back(Action::comm(ActionKind::SEND_B, a.peer, mb, s));
      break;
    case ActionKind::UNSHARD:
    case ActionKind::RESHARD:
    case ActionKind::REDUCE_GRAD:
      break;
  }
  return deps;
}

ReplayOutcome replay(const Schedule& schedule, const ExecuteFn& on_execute) {
  const bool lowered = schedule.has_comm();
  const size_t ranks = schedule.per_rank.size();
  std::map<Action, Position> produced;  // first execution of each key
  ReplayOutcome out;
  out.next.assign(ranks, 0);
  out.waiting.assign(ranks, {});
  auto is_stage_valid = [&](const Action& a) { return a.stage >= 0 && a.stage < schedule.stages; };

  std::vector<Position> producers;
  bool moved = true;
  while (moved) {
    moved = false;
    for (size_t r = 0; r < ranks; ++r) {
      const auto& list = schedule.per_rank[r];
      while (out.next[r] < list.size()) {
        const Action& a = list[out.next[r]];
        producers.clear();
        bool ready = true;
        if (is_stage_valid(a)) {
          for (const Action& key : data_dependencies(schedule, a, lowered)) {
            auto it = produced.find(key);
            if (it == produced.end()) {
              ready = false;
              break;
            }
            producers.push_back(it->second);
          }
        }
        if (!ready) break;
        const Position here{static_cast<int>(r), out.next[r]};
        on_execute(here.rank, here.index, producers);
        Action key = a;
        if (is_compute(a.kind)) key.peer = -1;
        produced.emplace(key, here);
        if (a.kind == ActionKind::B)
          produced.emplace(Action::compute(ActionKind::I, a.stage, a.microbatch), here);
        ++out.next[r];
        moved = true;
      }
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    const auto& list = schedule.per_rank[r];
    if (out.next[r] >= list.size()) continue;
    out.finished = false;
    if (!is_stage_valid(list[out.next[r]])) continue;
    for (const Action& key : data_dependencies(schedule, list[out.next[r]], lowered)) {
      if (!produced.contains(key)) out.waiting[r].push_back(key);
    }
  }
  return out;
}

std::string describe_stuck(const Schedule& schedule, const ReplayOutcome& outcome, int rank) {
  const auto r = static_cast<size_t>(rank);
  const size_t index = outcome.next.at(r);
  std::string text = fmt::format("rank {} stuck at index {}: {}", rank, index,
                                 to_string(schedule.per_rank.at(r).at(index)));
  const char* sep = " waits for ";
  for (const Action& key : outcome.waiting.at(r)) {
    // The input-gradient key stands for a B as well (see the header).
    text += sep + (key.kind == ActionKind::I
                       ? fmt::format("{} (or B{}.{})", to_string(key), key.stage, key.microbatch)
                       : to_string(key));
    sep = " and ";
  }
  return text;
}

std::string describe_deadlock(const Schedule& schedule, const ReplayOutcome& outcome) {
  std::string text;
  for (size_t r = 0; r < outcome.next.size(); ++r) {
    if (outcome.next[r] >= schedule.per_rank[r].size()) continue;
    if (!text.empty()) text += "; ";
    text += describe_stuck(schedule, outcome, static_cast<int>(r));
  }
  return text;
}

}  // namespace h2::parallel::pipeline
