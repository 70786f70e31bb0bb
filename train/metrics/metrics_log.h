// Training metrics: one JSON object per record appended to a JSON-lines file and flushed at once
// (a crash loses nothing already logged), plus the human progress line with the same figures.
//
// Every record has "event", "time" (UTC, ISO 8601 with milliseconds), "attempt" (0 for the first
// start, one more for each resume into the same file) and an integer "step":
//   start   the run begins at `step` (0, or the checkpoint's step): the resolved config, version
//   resume  after `start` when it continued from a checkpoint: the checkpoint and its step
//   step    a logged step: CLI.md's fields step, loss, lr, tokens_per_s, step_ms, mfu, mem_bytes
//           (eval_loss when evaluated, a pipeline's figures)
//   eval    an evaluation at `step`: eval_loss
//   stop    a stop signal ended the run after `step`, with a checkpoint there
//   done    the summary of a finished run
// The rule for readers: a resume at step N supersedes every earlier record with a step above N
// (those steps were redone); equivalently, keep the last record per (event, step).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

namespace h2::train {

struct StepMetrics {
  int64_t step = 0;  // 1-based optimizer step
  int64_t total_steps = 0;
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  double mfu = 0;         // model FLOPs / (step time * device peak)
  int64_t mem_bytes = 0;  // device memory in use
  double grad_norm = 0;
  std::optional<double> eval_loss;
  nlohmann::json extra = nlohmann::json::object();  // more fields (a pipeline's bubble, stashes)
  std::string extra_progress;                       // appended to the progress line
};

// The JSON object written for a step (also used by tests and tools).
nlohmann::json to_json(const StepMetrics& m);

// "step   40/300 | loss 2.4512 | lr 2.9e-03 | 18,230 tok/s | mfu 31.2% | mem 41.2 MiB | eta 1m12s"
std::string progress_line(const StepMetrics& m, double eta_seconds);

class MetricsLog {
 public:
  // Creates `path` (truncated, or appended to when `append`: a resumed run, whose attempt number
  // counts the start records already there) and its parent folders; an empty path logs nowhere.
  explicit MetricsLog(const std::string& path, bool append = false);
  void write_step(const StepMetrics& m);
  // A record {"event": event, "time": ..., "attempt": ..., "step": step, ...fields}.
  void write_event(std::string_view event, int64_t step,
                   const nlohmann::json& fields = nlohmann::json::object());
  int attempt() const { return attempt_; }

 private:
  void write(const nlohmann::json& line);
  std::string path_;
  std::ofstream file_;
  int attempt_ = 0;
};

}  // namespace h2::train
