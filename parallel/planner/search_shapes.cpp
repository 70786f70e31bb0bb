// The schedules a search tries and each shape's lowered schedule (see search_shapes.h).
#include "parallel/planner/search_shapes.h"

#include <algorithm>

namespace h2::parallel::planner {

using pipeline::ScheduleKind;

std::vector<std::pair<ScheduleKind, int>> schedule_choices(const SearchSpace& space, int P,
                                                           int64_t micro) {
  std::vector<std::pair<ScheduleKind, int>> out;
  for (ScheduleKind schedule : space.schedules) {
    if (P == 1 && schedule != ScheduleKind::k1F1B) continue;
    if (schedule != ScheduleKind::k1F1B || P == 1) {
      out.emplace_back(schedule, 0);
      continue;
    }
    int64_t previous = -1;
    for (int lead : space.leads) {
      const int64_t warmup = std::min<int64_t>(int64_t(P - 1) * (1 + lead), micro);
      if (warmup == previous) continue;
      previous = warmup;
      out.emplace_back(schedule, lead);
    }
  }
  return out;
}

const ShapeCache::Shape& ShapeCache::of(ScheduleKind schedule, int positions, int64_t micro,
                                        int chunks, int lead, bool fsdp) {
  const auto key = std::make_tuple(int(schedule), positions, micro, chunks, lead, fsdp);
  auto it = shapes_.find(key);
  if (it != shapes_.end()) return it->second;
  Plan plan;
  plan.group_sizes.assign(size_t(positions), 1);
  plan.schedule = schedule, plan.chunks = chunks, plan.lead = lead, plan.fsdp = fsdp;
  plan.micro_batches = int(micro);
  Shape shape{.lowered = plan.lowered_schedule()};
  for (const auto& list : shape.lowered.per_rank) shape.held.push_back(HeldCounts::of(list));
  return shapes_.emplace(key, std::move(shape)).first->second;
}

}  // namespace h2::parallel::planner
