// Unit implementations: thin compositions of the layers in models/layers/.
#include "models/units.h"

#include <string>

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

EmbeddingUnit::EmbeddingUnit(const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device)
    : emb_("model.embed_tokens.weight", cfg.vocab_size, cfg.dim, seed, dtype, device) {}

Tensor EmbeddingUnit::forward(const Tensor& ids) {
  return emb_.forward(ids);
}

Tensor EmbeddingUnit::backward(const Tensor& grad_output) {
  emb_.backward(grad_output);
  return Tensor();
}

BlockUnit::BlockUnit(int layer, const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device,
                     bool recompute)
    : attn_("model.layers." + std::to_string(layer) + ".", cfg, seed, dtype, device),
      mlp_("model.layers." + std::to_string(layer) + ".", cfg, seed, dtype, device),
      recompute_(recompute) {}

Tensor BlockUnit::forward(const Tensor& x) {
  Tensor y = mlp_.forward(attn_.forward(x));
  if (recompute_) {
    attn_.clear();
    mlp_.clear();
    input_ = x;
  }
  return y;
}

Tensor BlockUnit::backward(const Tensor& dy) {
  if (input_.defined()) {  // recompute: re-run the forward to rebuild the stash
    mlp_.forward(attn_.forward(input_));
    input_ = Tensor();
  }
  return attn_.backward(mlp_.backward(dy));
}

void BlockUnit::transfer_stash(StashTransfer& t) {
  attn_.transfer_stash(t);
  mlp_.transfer_stash(t);
  t(input_);
}

void BlockUnit::clear() {
  attn_.clear();
  mlp_.clear();
  input_ = Tensor();
}

void BlockUnit::set_defer_weight_grads(bool on) {
  for_each_linear([on](Linear& l) { l.set_defer_weight_grad(on); });
}

void BlockUnit::weight_backward() {
  attn_.weight_backward();
  mlp_.weight_backward();
}

void BlockUnit::set_weights_frozen(bool frozen) {
  for_each_linear([frozen](Linear& l) { l.set_weights_frozen(frozen); });
}

void BlockUnit::collect_linears(std::vector<Linear*>& out) {
  attn_.collect_linears(out);
  mlp_.collect_linears(out);
}

void BlockUnit::collect(std::vector<Param*>& out) {
  attn_.collect(out);
  mlp_.collect(out);
}

HeadUnit::HeadUnit(const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device, Param* tied)
    : norm_("model.norm.weight", cfg.dim, cfg.norm_eps, dtype, device), head_(tied) {
  if (!head_) {
    own_head_ = std::make_unique<Param>(make_param("lm_head.weight", {cfg.vocab_size, cfg.dim},
                                                   Init::normal, 0.02f, seed, dtype, device));
    head_ = own_head_.get();
  }
}

Tensor HeadUnit::forward(const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), V = head_->value.size(0);
  Tensor h = norm_.forward(x).view({B * T, C});
  Tensor logits = Tensor::empty({B, T, V}, x.dtype(), x.device());
  linear_fwd(logits.view({B * T, V}), h, *head_);
  h_ = h;
  return logits;
}

Tensor HeadUnit::backward(const Tensor& dlogits) {
  if (!h_.defined()) throw Error("HeadUnit: backward without forward");
  const int64_t B = dlogits.size(0), T = dlogits.size(1), V = dlogits.size(2);
  const int64_t C = h_.size(1);
  Tensor dh = Tensor::empty({B * T, C}, dlogits.dtype(), dlogits.device());
  linear_bwd(dh, dlogits.view({B * T, V}), h_, *head_);
  h_ = Tensor();
  return norm_.backward(dh.view({B, T, C}));
}

void HeadUnit::transfer_stash(StashTransfer& t) {
  norm_.transfer_stash(t);
  t(h_);
}

void HeadUnit::clear() {
  norm_.clear();
  h_ = Tensor();
}

void HeadUnit::collect(std::vector<Param*>& out) {
  out.push_back(&norm_.weight());
  if (own_head_) out.push_back(own_head_.get());
}

}  // namespace h2::models
