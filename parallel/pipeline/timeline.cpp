// A rank's measured pipeline steps (see timeline.h).
#include "parallel/pipeline/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

Timeline::Clock steady_clock_since_now() {
  return [start = std::chrono::steady_clock::now()] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  };
}

}  // namespace

Timeline::Timeline(StashCounter stash, TimelineOptions options, Clock clock)
    : stash_(std::move(stash)),
      options_(options),
      clock_(clock ? std::move(clock) : steady_clock_since_now()) {
  H2_CHECK(options_.keep_steps >= 1, "a timeline keeps at least one step, not {}",
           options_.keep_steps);
}

Timeline::Timeline(const PipelineRuntime& runtime, TimelineOptions options)
    : Timeline([&runtime] { return runtime.stashed_per_stage(); }, options) {}

void Timeline::step_started() {
  H2_CHECK(!current_, "step {} started before step {} finished",
           options_.first_step + finished_ + 1, options_.first_step + finished_);
  current_.emplace();
  current_->stats.step = options_.first_step + finished_;
  current_->stats.start_us = clock_();
}

void Timeline::action_started(const Action& action) {
  H2_CHECK(current_, "action {} started outside a step", to_string(action));
  H2_CHECK(!running_, "action {} started while {} is running", to_string(action),
           to_string(running_->action));
  const double now = clock_();
  running_ = TimelineEvent{action, current_->stats.step, now, now, now};
  stages_.insert(action.stage);
  current_->stats.peak_stash.try_emplace(action.stage, 0);
}

void Timeline::action_ready(const Action& action) {
  H2_CHECK(running_ && running_->action == action, "action_ready for {} while {} is running",
           to_string(action), running_ ? to_string(running_->action) : std::string("nothing"));
  running_->ready_us = clock_();
}

void Timeline::comm_waited(double microseconds) {
  H2_CHECK(running_, "a transfer wait of {} us outside an action", microseconds);
  running_->comm_wait_us += microseconds;
}

void Timeline::transfer_posted(int64_t id, const std::string& label) {
  H2_CHECK(current_, "transfer '{}' posted outside a step", label);
  open_transfers_[id] = {label, clock_(), 0};
}

void Timeline::transfer_done(int64_t id) {
  auto it = open_transfers_.find(id);
  H2_CHECK(current_ && it != open_transfers_.end(), "transfer {} done but not posted", id);
  it->second.end_us = clock_();
  current_->transfers.push_back(std::move(it->second));
  open_transfers_.erase(it);
}

void Timeline::action_finished(const Action& action) {
  H2_CHECK(running_ && running_->action == action, "action {} finished while {} is running",
           to_string(action), running_ ? to_string(running_->action) : std::string("nothing"));
  running_->end_us = clock_();
  PipelineStepStats& stats = current_->stats;
  if (is_compute(action.kind))
    stats.busy_ms += (running_->end_us - running_->ready_us - running_->comm_wait_us) / 1000.0;
  if (stash_)
    for (const auto& [stage, count] : stash_()) {
      int& peak = stats.peak_stash[stage];
      peak = std::max(peak, count);
    }
  current_->events.push_back(*running_);
  running_.reset();
}

void Timeline::step_finished() {
  H2_CHECK(current_, "step {} finished without starting", options_.first_step + finished_);
  H2_CHECK(!running_, "step {} finished while {} is running", current_->stats.step,
           running_ ? to_string(running_->action) : std::string());
  PipelineStepStats& stats = current_->stats;
  stats.end_us = clock_();
  for (auto& [id, span] : open_transfers_) {  // not seen complete: they ran to the step's end
    span.end_us = stats.end_us;
    current_->transfers.push_back(std::move(span));
  }
  open_transfers_.clear();
  stats.wall_ms = (stats.end_us - stats.start_us) / 1000.0;
  stats.bubble = stats.wall_ms > 0 ? 1.0 - stats.busy_ms / stats.wall_ms : 0.0;
  steps_.push_back(std::move(*current_));
  current_.reset();
  ++finished_;
  while (steps_.size() > size_t(options_.keep_steps)) steps_.pop_front();
}

std::optional<PipelineStepStats> Timeline::last_step() const {
  if (steps_.empty()) return std::nullopt;
  return steps_.back().stats;
}

PipelineStepStats combine_step_stats(const std::vector<PipelineStepStats>& ranks) {
  H2_CHECK(!ranks.empty(), "combining the step figures of no rank");
  PipelineStepStats job;
  job.step = ranks.front().step;
  job.start_us = std::numeric_limits<double>::infinity();
  job.end_us = -std::numeric_limits<double>::infinity();
  double busy = 0;
  for (const PipelineStepStats& r : ranks) {
    H2_CHECK(r.step == job.step, "combining step {} with step {}", job.step, r.step);
    busy += r.busy_ms;
    job.rank_busy_ms.push_back(r.busy_ms);
    job.start_us = std::min(job.start_us, r.start_us);
    job.end_us = std::max(job.end_us, r.end_us);
    for (const auto& [stage, peak] : r.peak_stash) {
      int& p = job.peak_stash[stage];
      p = std::max(p, peak);
    }
  }
  const double n = double(ranks.size());
  job.busy_ms = busy / n;
  job.wall_ms = (job.end_us - job.start_us) / 1000.0;
  job.bubble = job.wall_ms > 0 ? 1.0 - busy / (n * job.wall_ms) : 0.0;
  return job;
}

std::string progress_fields(const PipelineStepStats& stats) {
  std::string out = fmt::format("bubble {:.1f}%", 100.0 * stats.bubble);
  if (!stats.peak_stash.empty()) {
    out += " | stash ";
    bool first = true;
    for (const auto& [stage, peak] : stats.peak_stash) {
      if (!first) out += '/';
      out += std::to_string(peak);
      first = false;
    }
  }
  if (!stats.rank_exposed_comm_ms.empty())
    out += fmt::format(
        " | exposed comm {:.0f} ms",
        *std::max_element(stats.rank_exposed_comm_ms.begin(), stats.rank_exposed_comm_ms.end()));
  return out;
}

}  // namespace h2::parallel::pipeline
