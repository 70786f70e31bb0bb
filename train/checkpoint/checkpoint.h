// Training checkpoints: DIR/step_NNNNNN/ holds model.safetensors (FP32 master weights under their
// Hugging Face names, readable by other tools), optimizer.safetensors (AdamW moments "m/NAME",
// "v/NAME") and trainer.json (step, sampler position, the effective config). A checkpoint is
// written to a temporary folder and renamed into place, so a crash never leaves a partial one;
// the oldest are removed beyond keep_last.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "train/checkpoint/safetensors.h"

namespace h2::checkpoint {

struct TrainerState {
  int64_t step = 0;               // optimizer steps completed
  uint64_t sampler_position = 0;  // batches the training sampler has drawn
  std::string config_yaml;        // the effective config (dump_yaml)
};

// A tensor's elements (any device, any strides) as stored bytes.
StoredTensor store(const Tensor& tensor);
// Copies `stored` into `tensor` (same shape; dtype converted on tensor's device when they differ).
// Errors name `what` (the checkpoint file) and the tensor.
void load_into(Tensor& tensor, const StoredTensor& stored, const std::string& what);

// Returns the folder written.
std::string save_checkpoint(const std::string& dir, const TrainerState& state,
                            const TensorMap& model, const TensorMap& optimizer, int64_t keep_last);
// The newest complete checkpoint folder in `dir`, if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);
TrainerState read_trainer_state(const std::string& checkpoint_dir);
// The model's FP32 master weights in a checkpoint folder, as whole tensors under their Hugging
// Face names (however the writing ranks split them). ConfigError names a missing or bad file.
TensorMap read_model_tensors(const std::string& checkpoint_dir);

}  // namespace h2::checkpoint
