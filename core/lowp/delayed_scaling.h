// Per-tensor delayed scaling (Transformer Engine's default FP8 recipe), host side: the amax of
// the last H steps in a ring, and the multiplier a per-tensor f32_amax quantize imposes
// (QuantizeArgs::multiplier):
//   multiplier = max_finite / (max(history) * 2^margin)
// Each step records the amax the quantize of that step reported (its stats[0]), so the scale used
// at step t comes from steps t-H .. t-1. Before the first record there is no history, and the
// caller uses current scaling (the step's own amax) instead. A history whose max is 0 or not
// finite gives multiplier 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/lowp/formats.h"

namespace h2::lowp {

class DelayedScaling {
 public:
  // history_len >= 1; margin: extra power-of-two headroom (may be negative).
  explicit DelayedScaling(Format format, int history_len = 1024, int margin = 0);

  bool has_history() const { return recorded_ > 0; }
  // max_finite / (max(history) * 2^margin); 1 when the max is 0 or not finite. Needs a history.
  float multiplier() const;
  // Largest amax in the history (0 without one).
  float history_amax() const;
  // Records one step's amax; the oldest of H entries drops out.
  void record(float amax);

  Format format() const { return format_; }
  int history_len() const { return int(ring_.size()); }
  int margin() const { return margin_; }
  // Steps recorded so far (not capped at H).
  int64_t steps_recorded() const { return recorded_; }
  // The held entries, newest first (at most H), and their inverse for checkpoint resume.
  std::vector<float> history() const;
  void set_history(std::span<const float> newest_first, int64_t steps_recorded);

 private:
  Format format_;
  int margin_;
  std::vector<float> ring_;  // entry of step s at s % H
  int64_t recorded_ = 0;
};

}  // namespace h2::lowp
