// Loading trained weights into a models::Llama (see model_loading.h); also the model config and
// FLOPs per token that trainer.h declares, which loading and training share.
#include "train/model_loading.h"

#include <filesystem>

#include "core/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/hf_format.h"
#include "train/checkpoint/hf_tokenizer.h"
#include "train/trainer.h"

namespace h2::train {

// (Declared in trainer.h.)
models::LlamaConfig llama_config(const config::ModelConfig& m) {
  return {.vocab_size = m.vocab_size,
          .dim = m.dim,
          .n_layers = m.n_layers,
          .n_heads = m.n_heads,
          .n_kv_heads = m.n_kv_heads,
          .ffn_dim = m.ffn_dim,
          .seq_len = m.seq_len,
          .rope_theta = float(m.rope_theta),
          .rope_scaling = {.factor = m.rope_scaling_factor,
                           .low_freq_factor = m.rope_low_freq_factor,
                           .high_freq_factor = m.rope_high_freq_factor,
                           .original_max_positions = double(m.rope_original_max_positions)},
          .norm_eps = float(m.norm_eps),
          .tie_embeddings = m.tie_embeddings};
}

double training_flops_per_token(const models::LlamaConfig& cfg, int64_t num_parameters) {
  // The input embedding is a lookup, not a matmul: leave it out unless the head shares it.
  double matmul_parameters = double(num_parameters);
  if (!cfg.tie_embeddings) matmul_parameters -= double(cfg.vocab_size * cfg.dim);
  return 6.0 * matmul_parameters + 6.0 * double(cfg.n_layers * cfg.seq_len * cfg.dim);
}

std::string resolve_checkpoint_dir(const std::string& checkpoint_or_run_dir) {
  if (std::filesystem::exists(std::filesystem::path(checkpoint_or_run_dir) / "trainer.json"))
    return checkpoint_or_run_dir;
  if (auto latest = checkpoint::latest_checkpoint(checkpoint_or_run_dir)) return *latest;
  H2_THROW(ConfigError,
           "'{}' is neither a checkpoint folder (step_NNNNNN with trainer.json) nor a run folder "
           "holding one",
           checkpoint_or_run_dir);
}

config::TrainConfig checkpoint_config(const std::string& checkpoint_dir) {
  checkpoint::TrainerState state = checkpoint::read_trainer_state(checkpoint_dir);
  return config::parse_yaml(state.config_yaml, checkpoint_dir + "/trainer.json");
}

config::ModelConfig checkpoint_model_config(const std::string& checkpoint_dir) {
  return checkpoint_config(checkpoint_dir).model;
}

bool model_of_bytes(const config::TrainConfig& saved, const std::string& checkpoint_dir) {
  return saved.data.format == config::DataFormat::text &&
         !std::filesystem::exists(checkpoint::kept_tokenizer_dir(checkpoint_dir));
}

std::unique_ptr<models::Llama> build_llama(const config::ModelConfig& config,
                                           const checkpoint::TensorMap& weights,
                                           const std::string& source, Device& device, DType dtype) {
  auto model = std::make_unique<models::Llama>(llama_config(config), device,
                                               models::LlamaOptions{.dtype = dtype});
  for (auto& p : model->named_parameters()) {
    auto it = weights.find(p.name);
    if (it == weights.end()) H2_THROW(ConfigError, "{}: no tensor '{}'", source, p.name);
    checkpoint::load_into(p.param, it->second, source + ": " + p.name);
  }
  return model;
}

LoadedModel load_trained_model(const std::string& checkpoint_or_run_dir, Device& device,
                               DType dtype) {
  std::string dir = resolve_checkpoint_dir(checkpoint_or_run_dir);
  LoadedModel out{checkpoint_model_config(dir), dir, nullptr};
  out.model = build_llama(out.config, checkpoint::read_model_tensors(dir), dir, device, dtype);
  return out;
}

LoadedModel load_hf_model(const std::string& hf_dir, Device& device, DType dtype) {
  checkpoint::HfModel hf = checkpoint::read_hf_model(hf_dir);
  LoadedModel out{hf.config.model, hf_dir, nullptr};
  out.model = build_llama(out.config, hf.tensors, hf_dir, device, dtype);
  return out;
}

}  // namespace h2::train
