// Measures what one chip does with each kind of model unit (parallel/planner/profile.h): on the
// device itself, a one-block model of the config's shape runs the embedding, the block and the
// head with its loss for each micro-batch size, and the profiler times the forward, the whole
// backward, the backward split into input and weight gradients (ZB-H1), and one AdamW step with
// the gradient's sum of squares; it reads the device allocator for the activations a unit keeps
// from its forward to its backward (its input too, when it keeps it) and the transient workspace
// above them. Each figure is the median of `repeats` runs after one warm-up. On virtual chips the
// times are the paced (emulated) ones; on real chips, the real kernels'.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "parallel/planner/profile.h"

namespace h2::train {

struct ProfileOptions {
  std::vector<int64_t> rows = {1, 2, 4, 8};  // micro-batch sizes to measure
  int repeats = 5;
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // one line per measured size (optional)
};

// The profile of `device` for key.model in key.dtype (the key is stored as given).
parallel::planner::ChipProfile profile_chip(Device& device,
                                            const parallel::planner::ProfileKey& key,
                                            const ProfileOptions& options = {});

}  // namespace h2::train
