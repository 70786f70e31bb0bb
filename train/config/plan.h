// A HeteroPP plan file (parallel.plan), as h2 plan writes it or a person does: the pipeline's
// stages in model order, each a range of transformer blocks on a group of ranks of one chip type,
// and optionally every other decision of a plan and what HeteroAuto predicted for it:
//
//   replicas: 1                 # parallel.replicas (each stage group repeated per replica)
//   micro_batch_rows: 4         # train.batch_size
//   micro_batches: 4            # train.grad_accum
//   schedule: 1f1b              # parallel.schedule (and chunks, fsdp, gather_group,
//   fsdp: true                  #   recompute, wire_dtype: the parallel keys of those names)
//   predicted: {step_ms: 81.2, tokens_per_s: 25200, peak_mib: [60.1, 31.7], busy_ms: [70, 66]}
//   stages:
//     - {layers: 0-2, chip: vchip:chip-a, ranks: [0, 1]}
//     - {layers: 3-3, chip: vchip:chip-b, ranks: [2, 3]}
//
// The ranks are one replica's (0 ..); with chunks > 1 (interleaved) the stage list goes round the
// groups chunks times, each stage naming its group's ranks again. apply_plan() checks it against
// the config and the job (every layer exactly once and in order, every rank of a replica exactly
// once in consecutive groups, batch_size divisible by each group) and writes the config keys it
// sets (origin: the file), so the rest of H2 reads one description; the settings go through the
// key table, so a bad value is reported as for any key, with the file's line.
// estimate_stage_memory() predicts a rank's peak memory so that a plan that cannot fit a chip is
// refused before any work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/plan.h"
#include "train/config/config.h"

namespace h2::config {

struct PlanStage {
  int first_layer = 0, last_layer = 0;  // inclusive
  std::string chip;                     // device spec every rank of the group uses
  std::vector<int> ranks;
  std::string where;  // "plan.yaml:4"
};

struct PlanSetting {
  std::string key;    // the config key ("parallel.replicas")
  std::string value;  // as written
  std::string where;  // "plan.yaml:2"
};

struct Plan {
  std::vector<PlanStage> stages;
  std::vector<PlanSetting> settings;
  std::optional<PlanPrediction> predicted;
  std::string source;  // the file
};

// Reads the file; ConfigError naming FILE:LINE for malformed entries.
Plan load_plan(const std::string& path);
// The same from a plan file's text; `source` names it in messages.
Plan parse_plan(const std::string& text, const std::string& source);

// Checks `plan` against `config` and a job of `world_size` ranks and writes its settings and
// stages into the config (parallel.mode pipeline, stage_layers, stage_ranks, cluster.devices and
// the settings' keys; origin: the plan's file) and its prediction into config.prediction.
void apply_plan(const Plan& plan, TrainConfig& config, int world_size);

// The plan file text of `plan` (a pipeline plan: groups, layout, devices as chip types) with its
// prediction; `header` becomes the leading comment lines.
std::string plan_file_text(const parallel::Plan& plan, const std::vector<std::string>& chips,
                           const PlanPrediction& predicted, const std::string& header);

struct MemoryEstimate {
  int64_t parameters = 0;  // of the stage
  int64_t model_state_bytes = 0;
  int64_t activation_bytes = 0;  // `stashed` micro-batches' activations
  int64_t total() const { return model_state_bytes + activation_bytes; }
};

// Peak bytes one rank of a stage holding blocks [first_block, last_block] (plus the embedding
// on the first stage and the head on the last) needs, with `group` ranks splitting each
// micro-batch (and sharding parameters under FSDP) and `stashed` micro-batches in flight: f32
// parameters and gradients, AdamW's FP32 state (a tied table counted on the first and the last
// stage, which both hold it), and per block the activations its backward keeps in the compute
// dtype (train.dtype). An estimate from shapes, not a measurement; tests/train/config/plan_test.cpp
// works one example by hand. Each field saturates at 2^60 bytes (a config far beyond any machine
// comes out too large for it, never wrapped into a small number).
MemoryEstimate estimate_stage_memory(const TrainConfig& config, int first_block, int last_block,
                                     bool first_stage, bool last_stage, int group, int stashed);

}  // namespace h2::config
