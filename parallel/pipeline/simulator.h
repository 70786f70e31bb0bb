// Event-driven replay of a schedule with per-(stage, kind) durations: makespan, busy and idle
// time per rank, bubble fractions, and the peak number of stashed activations per rank.
//
// Timing: every rank runs its list in order; an action starts when the rank is free and its
// data dependencies (replay.h) have ended, and lasts durations.get(stage, kind). Transfers cost
// what their SEND_*/RECV_* durations say: a RECV starts once its SEND has ended, so a RECV's
// duration models the wire time. A transfer may instead fly (Durations::set_flight): its data
// arrives `flight` after its SEND ended whatever the receiver does meanwhile, and the RECV starts
// at the later of the arrival and the rank being free (the runtime posts receives early and waits
// only for data that has not arrived); its duration is then the receiver's own work (staging).
// On a schedule without transfers, a remote dependency is free.
//
// Stash: an F adds one activation to its rank's stash; a B releases it. With a split backward the
// weight gradient still needs the stage's inputs, so by default W releases it
// (StashRelease::kAtW); kAtI counts only what the input gradient frees. The peak is a property
// of the order alone, not of the durations. Interleaved schedules count chunk activations.
#pragma once

#include <array>
#include <vector>

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

// Seconds (or any unit) per action kind and stage. Defaults: F 1, B 2, I 1, W 1, everything
// else (transfers, UNSHARD, RESHARD, REDUCE_GRAD) 0.
class Durations {
 public:
  explicit Durations(int stages);

  Durations& set(ActionKind kind, double duration);             // every stage
  Durations& set(int stage, ActionKind kind, double duration);  // one stage
  double get(int stage, ActionKind kind) const;
  int stages() const { return static_cast<int>(table_.size()); }
  // Time on the wire of the transfer a RECV_F / RECV_B of `stage` receives (default 0).
  Durations& set_flight(int stage, ActionKind recv, double seconds);
  double flight(int stage, ActionKind recv) const;

 private:
  std::vector<std::array<double, kNumActionKinds>> table_;
  std::vector<std::array<double, kNumActionKinds>> flight_;
};

enum class StashRelease { kAtW, kAtI };

struct Interval {
  double start = 0;
  double end = 0;
};

struct SimulationResult {
  double makespan = 0;
  std::vector<double> busy;                     // per rank: total duration of its actions
  std::vector<double> finish;                   // per rank: end of its last action
  std::vector<int> peak_stash;                  // per rank
  std::vector<std::vector<Interval>> timeline;  // per rank, parallel to Schedule::per_rank
  // Idle share of ranks x makespan: 1 - sum(busy) / (ranks * makespan). For GPipe and 1F1B with
  // equal stages: (p - 1) / (m + p - 1).
  double bubble_fraction = 0;
  // Idle time relative to the work: (ranks * makespan - sum(busy)) / sum(busy), the "fraction of
  // ideal compute" of SCHEDULES.md: (p - 1) / m for GPipe and 1F1B, (p - 1) / (v m) interleaved.
  double bubble_over_compute = 0;

  double idle(int rank) const { return makespan - busy.at(static_cast<size_t>(rank)); }
};

// Throws h2::Error naming the stuck ranks and their next actions if the schedule deadlocks, or
// if durations does not cover the schedule's stages.
SimulationResult simulate(const Schedule& schedule, const Durations& durations,
                          StashRelease release = StashRelease::kAtW);

// Peak stashed activations per rank (see above); needs no durations.
std::vector<int> peak_stash(const Schedule& schedule, StashRelease release = StashRelease::kAtW);

}  // namespace h2::parallel::pipeline
