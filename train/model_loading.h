// Trained weights into a ready models::Llama, for the commands that use a model rather than train
// it (generate, logits, export): from an H2 checkpoint folder or a run's checkpoint.dir (its newest
// checkpoint), or from a Hugging Face model folder. Weights are read only through
// checkpoint::read_model_tensors / read_hf_model, whatever the on-disk layout.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "models/llama.h"
#include "train/checkpoint/safetensors.h"
#include "train/config/config.h"

namespace h2::train {

struct LoadedModel {
  config::ModelConfig config;
  std::string source;  // the folder the weights came from (a run's newest checkpoint, resolved)
  std::unique_ptr<models::Llama> model;
};

// `checkpoint_or_run_dir` itself when it is a checkpoint folder (holds trainer.json), else the
// newest checkpoint inside it; ConfigError when it is neither.
std::string resolve_checkpoint_dir(const std::string& checkpoint_or_run_dir);

// The config stored with a checkpoint (its trainer.json's effective config), and its model.
config::TrainConfig checkpoint_config(const std::string& checkpoint_dir);
config::ModelConfig checkpoint_model_config(const std::string& checkpoint_dir);
// Whether the model of a checkpoint whose config is `saved` takes bytes as token ids: trained on
// text (its vocabulary may exceed the 256 bytes) and not imported, whose run reads text only as
// a stand-in (h2 import keeps a tokenizer folder beside its checkpoints, hf_tokenizer.h).
bool model_of_bytes(const config::TrainConfig& saved, const std::string& checkpoint_dir);

// A Llama of `config` in `dtype` on `device` holding `weights` (FP32 or any float dtype, under
// Hugging Face names); `source` names the weights in errors (missing tensor, wrong shape).
std::unique_ptr<models::Llama> build_llama(const config::ModelConfig& config,
                                           const checkpoint::TensorMap& weights,
                                           const std::string& source, Device& device, DType dtype);

// The model of an H2 checkpoint (or a run's newest checkpoint).
LoadedModel load_trained_model(const std::string& checkpoint_or_run_dir, Device& device,
                               DType dtype);
// The model of a Hugging Face LlamaForCausalLM folder (train/checkpoint/hf_format.h).
LoadedModel load_hf_model(const std::string& hf_dir, Device& device, DType dtype);

}  // namespace h2::train
