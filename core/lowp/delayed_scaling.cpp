// Delayed-scaling amax history (see delayed_scaling.h).
#include "core/lowp/delayed_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace h2::lowp {

DelayedScaling::DelayedScaling(Format format, int history_len, int margin)
    : format_(format), margin_(margin) {
  H2_CHECK(history_len >= 1, "delayed scaling needs a history of at least 1 step, got {}",
           history_len);
  H2_CHECK(format != Format::e8m0, "delayed scaling of e8m0: not an element format");
  ring_.assign(size_t(history_len), 0.0f);
}

float DelayedScaling::history_amax() const {
  const size_t held = size_t(std::min<int64_t>(recorded_, int64_t(ring_.size())));
  float amax = 0;
  // Where the ring is not yet full, the unrecorded entries are zeros, which do not change a max,
  // but a NaN anywhere makes the max NaN, so that multiplier() reports it as not finite.
  for (size_t i = 0; i < held; ++i) {
    if (std::isnan(ring_[i])) return ring_[i];
    amax = std::max(amax, std::fabs(ring_[i]));
  }
  return amax;
}

float DelayedScaling::multiplier() const {
  H2_CHECK(has_history(), "delayed scaling has no amax history yet: use current scaling");
  const float amax = std::ldexp(history_amax(), margin_);
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  const float m = format_info(format_).max_finite / amax;
  return std::isfinite(m) ? m : std::numeric_limits<float>::max();
}

void DelayedScaling::record(float amax) {
  ring_[size_t(recorded_ % int64_t(ring_.size()))] = amax;
  ++recorded_;
}

std::vector<float> DelayedScaling::history() const {
  const int64_t h = int64_t(ring_.size());
  const int64_t held = std::min(recorded_, h);
  std::vector<float> out;
  out.reserve(size_t(held));
  for (int64_t i = 0; i < held; ++i) out.push_back(ring_[size_t((recorded_ - 1 - i) % h)]);
  return out;
}

void DelayedScaling::set_history(std::span<const float> newest_first, int64_t steps_recorded) {
  const int64_t h = int64_t(ring_.size());
  H2_CHECK(int64_t(newest_first.size()) == std::min(steps_recorded, h),
           "delayed scaling: {} history entries for {} recorded steps and length {}",
           newest_first.size(), steps_recorded, h);
  std::fill(ring_.begin(), ring_.end(), 0.0f);
  recorded_ = steps_recorded;
  for (int64_t i = 0; i < int64_t(newest_first.size()); ++i)
    ring_[size_t((recorded_ - 1 - i) % h)] = newest_first[size_t(i)];
}

}  // namespace h2::lowp
