// Llama model assembly and the whole-model forward/backward.
#include "models/llama.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

void LlamaConfig::validate() const {
  auto fail = [](const std::string& what) { throw ConfigError("LlamaConfig: " + what); };
  if (vocab_size <= 0 || dim <= 0 || n_layers < 0 || n_heads <= 0 || n_kv_heads <= 0 ||
      ffn_dim <= 0 || seq_len <= 0)
    fail("vocab_size, dim, n_heads, n_kv_heads, ffn_dim, seq_len must be positive");
  if (dim % n_heads != 0) fail(fmt::format("n_heads {} does not divide dim {}", n_heads, dim));
  if (n_heads % n_kv_heads != 0)
    fail(fmt::format("n_kv_heads {} does not divide n_heads {}", n_kv_heads, n_heads));
  if (head_dim() % 2 != 0) fail(fmt::format("head dim {} must be even (rotary)", head_dim()));
  if (!(rope_theta > 0) || !(norm_eps > 0)) fail("rope_theta and norm_eps must be positive");
  if (rope_scaling.enabled() && !(rope_scaling.low_freq_factor > 0 &&
                                  rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
                                  rope_scaling.original_max_positions > 0))
    fail(
        "Llama 3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
        "original_max_position_embeddings");
}

Llama::Llama(const LlamaConfig& cfg, Device& device, const LlamaOptions& options)
    : cfg_(cfg), device_(&device), dtype_(options.dtype) {
  cfg_.validate();
  auto place = [&](int unit) -> Device& {
    Device* chosen = options.place ? options.place(unit) : nullptr;
    return chosen != nullptr ? *chosen : device;
  };
  embedding_ = std::make_unique<EmbeddingUnit>(cfg_, options.seed, dtype_, place(0));
  for (int i = 0; i < int(cfg_.n_layers); ++i)
    blocks_.push_back(std::make_unique<BlockUnit>(i, cfg_, options.seed, dtype_, place(i + 1),
                                                  options.recompute));
  head_ = std::make_unique<HeadUnit>(cfg_, options.seed, dtype_, place(int(cfg_.n_layers) + 1),
                                     cfg_.tie_embeddings ? &embedding_->table() : nullptr);
}

std::vector<Unit*> Llama::units() {
  std::vector<Unit*> out{embedding_.get()};
  for (auto& b : blocks_) out.push_back(b.get());
  out.push_back(head_.get());
  return out;
}

nn::Param* Llama::tied_parameter() {
  return cfg_.tie_embeddings ? &embedding_->table() : nullptr;
}

std::vector<NamedParameter> Llama::named_parameters() {
  std::vector<Param*> params;
  for (Unit* u : units()) u->collect(params);
  std::vector<NamedParameter> out;
  for (Param* p : params) out.push_back({p->name, p->value, p->grad});
  return out;
}

int64_t Llama::num_parameters() {
  int64_t n = 0;
  for (const auto& p : named_parameters()) n += p.param.numel();
  return n;
}

void Llama::zero_grad() {
  for (auto& p : named_parameters()) ops::fill({.out = p.grad, .value = 0});
}

std::vector<Linear*> Llama::linears() {
  std::vector<Linear*> out;
  for (auto& b : blocks_) b->collect_linears(out);
  return out;
}

int Llama::apply_precision(const lowp::PrecisionPolicy& policy, int64_t step, int64_t total_steps) {
  const auto n_layers = int64_t(blocks_.size());
  int changed = 0;
  for (int64_t layer = 0; layer < n_layers; ++layer) {
    std::vector<Linear*> linears;
    blocks_[size_t(layer)]->collect_linears(linears);
    for (Linear* linear : linears) {
      const lowp::Precision precision =
          policy.recipe_for(linear->module(), layer, n_layers, step, total_steps);
      if (linear->precision() == precision) continue;
      if (precision == lowp::Precision::compute)
        linear->set_recipe(std::nullopt);
      else
        linear->set_recipe(lowp::find_recipe(precision, policy.mx_rule), policy.options);
      ++changed;
    }
  }
  return changed;
}

void Llama::set_recompute(bool on) {
  for (auto& b : blocks_) b->set_recompute(on);
}

Tensor Llama::forward_all(const Tensor& inputs, int64_t B, int64_t T) {
  if (T > cfg_.seq_len)
    throw Error(fmt::format("Llama: sequence length {} exceeds seq_len {}", T, cfg_.seq_len));
  if (inputs.numel() != B * T)
    throw Error(fmt::format("Llama: {} input ids for B={} T={}", inputs.numel(), B, T));
  Tensor x = inputs.view({B, T});
  for (Unit* u : units()) x = u->forward(x);
  return x.view({B * T, cfg_.vocab_size});
}

void Llama::clear_all() {
  for (Unit* u : units()) u->clear();
}

float Llama::forward_backward(const Tensor& inputs, const Tensor& targets, int64_t B, int64_t T,
                              float grad_scale, const std::function<void(size_t unit)>& unit_done) {
  Tensor logits = forward_all(inputs, B, T);
  Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  nn::LossSum l = nn::cross_entropy_loss(logits, targets, dlogits, grad_scale);
  logits = Tensor();
  Tensor grad = dlogits.view({B, T, cfg_.vocab_size});
  std::vector<Unit*> us = units();
  for (size_t u = us.size(); u-- > 0;) {
    grad = us[u]->backward(grad);
    if (unit_done) unit_done(u);
  }
  return nn::mean_loss(l);
}

float Llama::loss(const Tensor& inputs, const Tensor& targets, int64_t B, int64_t T) {
  Tensor logits = forward_all(inputs, B, T);
  clear_all();
  return nn::mean_loss(nn::cross_entropy_loss(logits, targets, Tensor(), 1));
}

Tensor Llama::forward_logits(const Tensor& inputs, int64_t B, int64_t T) {
  Tensor logits = forward_all(inputs, B, T);
  clear_all();
  return logits;
}

}  // namespace h2::models
