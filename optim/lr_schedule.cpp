// Warm-up + cosine learning-rate schedule (see lr_schedule.h).
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace h2::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps);
  int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 0 || step >= total_steps) return min_lr;
  double progress = double(step - warmup_steps) / double(decay_steps);
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace h2::optim
