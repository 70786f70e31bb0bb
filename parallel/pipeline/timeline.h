// What a pipeline step looked like on one rank, measured: every action's start and end, the
// peak number of stashed activations per stage, and per step the busy time, the wall time and
// the bubble fraction. A Timeline is the runtime's ActionObserver (PipelineRuntime::set_observer);
// trace_events.h turns the timelines of a job into one Chrome trace and job-wide figures.
//
// Definitions (the simulator's, simulator.h, so measured and predicted figures compare):
//  - times are microseconds of the Timeline's clock: steady_clock since its creation unless a
//    clock is injected (tests drive time);
//  - wall time: step_started to step_finished;
//  - busy time: the compute actions (F, B, I, W), each from the moment its inputs are ready to its
//    end. The runtime waits for a compute's incoming activation or gradient inside the action; if
//    it calls action_ready once the wait is over, the wait counts as idle, otherwise the whole
//    action counts as busy; waits inside the action for other transfers (comm_waited: prefetched
//    FSDP gathers, or the rank's own sends with overlap off) are not busy either;
//  - bubble = 1 - busy / wall. Job-wide (combine_step_stats): 1 - sum(busy) / (ranks * span),
//    span from the earliest start to the latest end, (p - 1) / (m + p - 1) for 1F1B with equal
//    stages, as the simulator's bubble_fraction;
//  - peak stash: the largest number of activations stashed on a stage, sampled after every action
//    (a stage of the rank that stashes nothing reports 0).
// Memory: the events of the last `keep_steps` steps are kept (older steps are dropped whole); the
// figures of each step are final when it ends.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "parallel/pipeline/action.h"
#include "parallel/pipeline/pipeline_runtime.h"

namespace h2::parallel::pipeline {

// A span of the communication lane: a transfer from its posting to its observed completion.
struct CommSpan {
  std::string label;
  double start_us = 0, end_us = 0;
};

struct TimelineEvent {
  Action action;
  int64_t step = 0;
  double start_us = 0;
  double ready_us = 0;  // inputs ready (== start_us unless action_ready was called)
  double end_us = 0;
  double comm_wait_us = 0;  // inside the action, waiting for gathers or (overlap off) sends
};

// One step's figures: one rank's (Timeline::last_step) or the job's (combine_step_stats).
struct PipelineStepStats {
  int64_t step = 0;
  double bubble = 0;                 // 1 - busy / wall (job: 1 - sum(busy) / (ranks * wall))
  std::map<int, int> peak_stash;     // stage -> peak stashed activations
  double busy_ms = 0;                // compute time (job: mean over ranks)
  std::vector<double> rank_busy_ms;  // job: each rank's compute time, in rank order
  // job: each rank's exposed communication (exposed_comm.h), in rank order; empty when the ranks'
  // clocks were not aligned
  std::vector<double> rank_exposed_comm_ms;
  double wall_ms = 0;               // step time (job: earliest start to latest end)
  double start_us = 0, end_us = 0;  // on the Timeline's clock (job: rank 0's)
};

struct TimelineOptions {
  int keep_steps = 16;     // steps whose events are kept (at least 1)
  int64_t first_step = 1;  // number of the first step observed (a resumed run's next step)
};

class Timeline final : public ActionObserver {
 public:
  using Clock = std::function<double()>;                     // microseconds, non-decreasing
  using StashCounter = std::function<std::map<int, int>()>;  // stage -> stashed now

  // `stash` may be empty (no peaks recorded); `clock` empty: steady_clock since now.
  explicit Timeline(StashCounter stash, TimelineOptions options = {}, Clock clock = {});
  // Samples runtime.stashed_per_stage(); the runtime must outlive the Timeline's steps.
  explicit Timeline(const PipelineRuntime& runtime, TimelineOptions options = {});
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // ActionObserver. Out-of-order calls (an action outside a step, a finish that does not match
  // the action started) throw h2::Error naming the actions.
  void step_started() override;
  void action_started(const Action& action) override;
  void action_finished(const Action& action) override;
  void step_finished() override;
  // The running compute action's inputs arrived: busy time starts now (see the header comment).
  void action_ready(const Action& action) override;
  void comm_waited(double microseconds) override;
  void transfer_posted(int64_t id, const std::string& label) override;
  void transfer_done(int64_t id) override;

  double now_us() const { return clock_(); }

  struct StepRecord {
    PipelineStepStats stats;
    std::vector<TimelineEvent> events;  // in action order
    std::vector<CommSpan> transfers;    // the communication lane, in completion order
  };
  // The kept steps, oldest first, and how many steps finished in all.
  const std::deque<StepRecord>& kept_steps() const { return steps_; }
  int64_t steps_finished() const { return finished_; }
  // The last finished step's figures; nullopt before the first step ends.
  std::optional<PipelineStepStats> last_step() const;
  // Every stage this rank has run an action of.
  const std::set<int>& stages() const { return stages_; }

  // Offset (microseconds) that maps this clock onto rank 0's (trace_events.h, align_clocks).
  void set_clock_offset_us(double offset) { offset_us_ = offset, aligned_ = true; }
  double clock_offset_us() const { return offset_us_; }
  bool aligned() const { return aligned_; }

 private:
  StashCounter stash_;
  TimelineOptions options_;
  Clock clock_;
  std::deque<StepRecord> steps_;
  std::optional<StepRecord> current_;
  std::optional<TimelineEvent> running_;
  std::map<int64_t, CommSpan> open_transfers_;
  int64_t finished_ = 0;
  std::set<int> stages_;
  double offset_us_ = 0;
  bool aligned_ = false;
};

// The job's figures from every rank's, with start_us/end_us on one clock (see the header).
// Throws h2::Error on an empty list.
PipelineStepStats combine_step_stats(const std::vector<PipelineStepStats>& ranks);

// "bubble 27.3% | stash 4/3/2/1 | exposed comm 12 ms" (stashes in stage order; the most any rank
// waited on its links) for the progress line.
std::string progress_fields(const PipelineStepStats& stats);

// Adds "bubble", "busy_ms", "wall_ms", "peak_stash" ({"0": 4, "1": 3}: stage -> peak) and, per
// rank, "busy_ms_per_rank" and "exposed_comm_ms_per_rank" to a
// JSON object; written for nlohmann::json (any type with string-keyed operator[] and assignment
// from numbers works), so that parallel/ needs no JSON library.
template <class JsonObject>
void add_json_fields(const PipelineStepStats& stats, JsonObject& object) {
  object["bubble"] = stats.bubble;
  object["busy_ms"] = stats.busy_ms;
  object["wall_ms"] = stats.wall_ms;
  if (!stats.rank_busy_ms.empty()) object["busy_ms_per_rank"] = stats.rank_busy_ms;
  if (!stats.rank_exposed_comm_ms.empty())
    object["exposed_comm_ms_per_rank"] = stats.rank_exposed_comm_ms;
  for (const auto& [stage, peak] : stats.peak_stash)
    object["peak_stash"][std::to_string(stage)] = peak;
}

}  // namespace h2::parallel::pipeline
