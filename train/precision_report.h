// What the low-precision GEMMs of a model are doing, for the metrics file and the progress line:
// the active recipe of each block linear, each quantized operand's amax and saturated fraction,
// and the worst saturation (the first sign that a recipe is in trouble).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/layers/linear.h"

namespace h2::train {

struct PrecisionReport {
  nlohmann::json json;   // {"recipes": {name: layers}, "worst_saturation": {...}, "layers": {...}}
  std::string progress;  // "nvfp4 x20, compute x8 | sat 0.12% layers.3.mlp.down_proj dy"
};

// Layers whose operands were never quantized on this rank (another pipeline stage's blocks)
// count in "recipes" but report no figures. Reads device statistics: synchronises.
PrecisionReport precision_report(const std::vector<models::Linear*>& linears);

// "nvfp4 x20, compute x8": recipes in first-use order with their layer counts.
std::string recipe_summary(const std::vector<models::Linear*>& linears);

}  // namespace h2::train
