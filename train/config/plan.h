// A HeteroPP plan file (parallel.plan): the pipeline's stages, each a range of transformer blocks
// on a group of ranks of one chip type, in model order:
//
//   stages:
//     - {layers: 0-2, chip: vchip:chip-a, ranks: [0, 1]}
//     - {layers: 3-3, chip: vchip:chip-b, ranks: [2, 3]}
//
// apply_plan() checks it against the config and the job (every layer exactly once and in order,
// every rank of the job exactly once, groups of consecutive ranks, batch_size divisible by each
// group) and writes parallel.stage_layers, parallel.stage_ranks and cluster.devices from it, so
// the rest of H2 reads one description. estimate_stage_memory() predicts a rank's peak memory so
// that a plan that cannot fit a chip is refused before any work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace h2::config {

struct PlanStage {
  int first_layer = 0, last_layer = 0;  // inclusive
  std::string chip;                     // device spec every rank of the group uses
  std::vector<int> ranks;
  std::string where;  // "plan.yaml:4"
};

struct Plan {
  std::vector<PlanStage> stages;
  std::string source;  // the file
};

// Reads the file; ConfigError naming FILE:LINE for malformed entries.
Plan load_plan(const std::string& path);

// Checks `plan` against `config` and a job of `world_size` ranks and writes its stages into
// parallel.stage_layers, parallel.stage_ranks and cluster.devices (origin: the plan's file).
void apply_plan(const Plan& plan, TrainConfig& config, int world_size);

struct MemoryEstimate {
  int64_t parameters = 0;  // of the stage
  int64_t model_state_bytes = 0;
  int64_t activation_bytes = 0;  // `stashed` micro-batches' activations
  int64_t total() const { return model_state_bytes + activation_bytes; }
};

// Peak bytes one rank of a stage holding blocks [first_block, last_block] (plus the embedding
// on the first stage and the head on the last) needs, with `group` ranks splitting each
// micro-batch (and sharding parameters under FSDP) and `stashed` micro-batches in flight: f32
// parameters and gradients, AdamW's FP32 state, and per block the activations its backward
// keeps. An estimate from shapes, not a measurement.
MemoryEstimate estimate_stage_memory(const TrainConfig& config, int first_block, int last_block,
                                     bool first_stage, bool last_stage, int group, int stashed);

}  // namespace h2::config
