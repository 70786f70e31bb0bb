// Link-bound waits and blocking collectives per rank (see exposed_comm.h).
#include "parallel/pipeline/exposed_comm.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace h2::parallel::pipeline {

std::vector<double> exposed_comm_ms(const std::vector<std::vector<TimelineEvent>>& events_by_rank) {
  // When the data for (send kind, consuming stage, micro-batch) was last posted, over producers.
  std::map<std::tuple<ActionKind, int, int>, double> posted;
  for (const auto& events : events_by_rank)
    for (const TimelineEvent& e : events) {
      const Action& a = e.action;
      if (a.kind != ActionKind::SEND_F && a.kind != ActionKind::SEND_B) continue;
      const auto [it, first] = posted.try_emplace({a.kind, a.peer, a.microbatch}, e.end_us);
      if (!first) it->second = std::max(it->second, e.end_us);
    }
  std::vector<double> out;
  for (const auto& events : events_by_rank) {
    double us = 0;
    for (const TimelineEvent& e : events) {
      const Action& a = e.action;
      if (a.kind == ActionKind::UNSHARD || a.kind == ActionKind::REDUCE_GRAD) {
        us += e.end_us - e.start_us;
        continue;
      }
      us += e.comm_wait_us;  // a compute waiting for a prefetched gather or its own sends
      if (!is_compute(a.kind) || a.kind == ActionKind::W || e.ready_us <= e.start_us) continue;
      const ActionKind send = a.kind == ActionKind::F ? ActionKind::SEND_F : ActionKind::SEND_B;
      const auto it = posted.find({send, a.stage, a.microbatch});
      if (it == posted.end()) continue;
      us += std::max(0.0, e.ready_us - std::max(e.start_us, it->second));
    }
    out.push_back(us / 1000.0);
  }
  return out;
}

}  // namespace h2::parallel::pipeline
