// Simulator: the replay of replay.h with start and end times, and the stash count per rank.
#include "parallel/pipeline/simulator.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/pipeline/replay.h"

namespace h2::parallel::pipeline {
namespace {

constexpr std::array<double, kNumActionKinds> kDefaults = {1, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0};

}  // namespace

Durations::Durations(int stages) {
  H2_CHECK(stages >= 1, "durations need at least one stage, got stages = {}", stages);
  table_.assign(static_cast<size_t>(stages), kDefaults);
  flight_.assign(static_cast<size_t>(stages), {});
}

Durations& Durations::set_flight(int stage, ActionKind recv, double seconds) {
  H2_CHECK(is_recv(recv), "a flight time belongs to a receive, not {}", action_kind_name(recv));
  H2_CHECK(stage >= 0 && stage < stages() && seconds >= 0, "flight {} s for stage {} of {}",
           seconds, stage, stages());
  flight_[static_cast<size_t>(stage)][static_cast<size_t>(recv)] = seconds;
  return *this;
}

double Durations::flight(int stage, ActionKind recv) const {
  return flight_.at(static_cast<size_t>(stage))[static_cast<size_t>(recv)];
}

Durations& Durations::set(ActionKind kind, double duration) {
  for (int s = 0; s < stages(); ++s) set(s, kind, duration);
  return *this;
}

Durations& Durations::set(int stage, ActionKind kind, double duration) {
  H2_CHECK(stage >= 0 && stage < stages(), "duration for stage {} outside [0, {})", stage,
           stages());
  H2_CHECK(duration >= 0, "duration of {} on stage {} is negative: {}", action_kind_name(kind),
           stage, duration);
  table_[static_cast<size_t>(stage)][static_cast<size_t>(kind)] = duration;
  return *this;
}

double Durations::get(int stage, ActionKind kind) const {
  H2_CHECK(stage >= 0 && stage < stages(), "duration for stage {} outside [0, {})", stage,
           stages());
  return table_[static_cast<size_t>(stage)][static_cast<size_t>(kind)];
}

std::vector<int> peak_stash(const Schedule& schedule, StashRelease release) {
  const ActionKind split_release = release == StashRelease::kAtW ? ActionKind::W : ActionKind::I;
  std::vector<int> peaks;
  for (const auto& list : schedule.per_rank) {
    int held = 0;
    int peak = 0;
    for (const Action& a : list) {
      if (a.kind == ActionKind::F) peak = std::max(peak, ++held);
      if (a.kind == ActionKind::B || a.kind == split_release) --held;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

SimulationResult simulate(const Schedule& schedule, const Durations& durations,
                          StashRelease release) {
  schedule.check_shape();
  H2_CHECK(durations.stages() == schedule.stages,
           "durations cover {} stages but the schedule has {}", durations.stages(),
           schedule.stages);
  const size_t ranks = schedule.per_rank.size();
  SimulationResult res;
  res.busy.assign(ranks, 0.0);
  res.finish.assign(ranks, 0.0);
  res.timeline.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) res.timeline[r].resize(schedule.per_rank[r].size());

  ReplayOutcome outcome = replay(schedule, [&](int rank, size_t index, auto producers) {
    const auto r = static_cast<size_t>(rank);
    const Action& a = schedule.per_rank[r][index];
    double start = res.finish[r];
    const double flight = is_recv(a.kind) ? durations.flight(a.stage, a.kind) : 0.0;
    for (const Position& p : producers) {
      start = std::max(start, res.timeline[static_cast<size_t>(p.rank)][p.index].end + flight);
    }
    const double d = durations.get(a.stage, a.kind);
    res.timeline[r][index] = {start, start + d};
    res.finish[r] = start + d;
    res.busy[r] += d;
  });
  if (!outcome.finished) {
    H2_THROW(Error, "simulate: the schedule deadlocks: {}", describe_deadlock(schedule, outcome));
  }
  double total_busy = 0;
  for (size_t r = 0; r < ranks; ++r) {
    res.makespan = std::max(res.makespan, res.finish[r]);
    total_busy += res.busy[r];
  }
  const double capacity = res.makespan * static_cast<double>(ranks);
  res.bubble_fraction = capacity > 0 ? 1.0 - total_busy / capacity : 0.0;
  res.bubble_over_compute = total_busy > 0 ? (capacity - total_busy) / total_busy : 0.0;
  res.peak_stash = peak_stash(schedule, release);
  return res;
}

}  // namespace h2::parallel::pipeline
