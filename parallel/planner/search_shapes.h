// What the plan search (search.h) derives from a plan's shape alone, apart from its layer split
// and chips: which schedules a class's members try, and each shape's lowered schedule with what
// every position holds at its compute actions, computed once per worker.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/generators.h"
#include "parallel/planner/memory_model.h"
#include "parallel/planner/search.h"

namespace h2::parallel::planner {

// The schedules a class's members try on P positions: each of the space's, 1f1b with each lead
// that changes its warm-up (one position has nothing to run ahead of; a lead whose warm-up
// already covers every micro-batch repeats the previous one).
std::vector<std::pair<pipeline::ScheduleKind, int>> schedule_choices(const SearchSpace& space,
                                                                     int P, int64_t micro);

// Per worker, what depends on a plan's shape alone (schedule, positions, micro-batches, chunks,
// lead, FSDP) and not on its split or chips: the lowered schedule the cost model replays and what
// each position holds at its compute actions (memory_model.h).
class ShapeCache {
 public:
  struct Shape {
    pipeline::Schedule lowered;
    std::vector<HeldCounts> held;
  };
  const Shape& of(pipeline::ScheduleKind schedule, int positions, int64_t micro, int chunks,
                  int lead, bool fsdp);

 private:
  std::map<std::tuple<int, int, int64_t, int, int, bool>, Shape> shapes_;
};

}  // namespace h2::parallel::planner
