// Learning-rate schedule: linear warm-up from 0 to `lr` over `warmup_steps`, then cosine decay
// to `min_lr` at `total_steps` (and `min_lr` after). Steps count from 0; a pure function, so a
// resumed run gets the same rate for the same step.
#pragma once

#include <cstdint>

namespace h2::optim {

struct LrSchedule {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // The rate for optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace h2::optim
