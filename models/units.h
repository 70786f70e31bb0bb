// The units a Llama model is a list of, so pipeline parallelism can split it between stages:
// EmbeddingUnit, L BlockUnits, HeadUnit, each an nn::Unit (nn/unit.h: forward, backward, stash
// take/put, split backward), composed from the layers in models/layers/.
// Shapes: ids (B, T) i32/i64; hidden (B, T, C); logits (B, T, V).
#pragma once

#include <memory>
#include <vector>

#include "models/layers/attention.h"
#include "models/layers/embedding.h"
#include "models/layers/mlp.h"
#include "models/layers/rms_norm.h"
#include "models/llama_config.h"
#include "nn/unit.h"

namespace h2::models {

using Unit = nn::Unit;

// ids (B, T) -> hidden (B, T, C).
class EmbeddingUnit : public Unit {
 public:
  EmbeddingUnit(const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device);
  Tensor forward(const Tensor& ids) override;
  Tensor backward(const Tensor& grad_output) override;
  void clear() override { emb_.clear(); }
  void transfer_stash(StashTransfer& t) override { emb_.transfer_stash(t); }
  void collect(std::vector<Param*>& out) override { out.push_back(&emb_.weight()); }
  Param& table() { return emb_.weight(); }

 private:
  Embedding emb_;
};

// One decoder block (attention then MLP sub-layer). With recompute, forward keeps only its
// input and backward re-runs the forward before differentiating (bit-identical gradients).
class BlockUnit : public Unit {
 public:
  BlockUnit(int layer, const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device,
            bool recompute);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  void clear() override;
  void transfer_stash(StashTransfer& t) override;
  void collect(std::vector<Param*>& out) override;
  void set_recompute(bool on) { recompute_ = on; }
  // The seven linear layers (q, k, v, o, gate, up, down): their GEMM precision is set per layer.
  void collect_linears(std::vector<Linear*>& out);
  void set_defer_weight_grads(bool on) override;
  void weight_backward() override;
  void set_weights_frozen(bool frozen) override;

 private:
  template <class Fn>
  void for_each_linear(Fn&& fn) {
    std::vector<Linear*> linears;
    collect_linears(linears);
    for (Linear* l : linears) fn(*l);
  }

  Attention attn_;
  Mlp mlp_;
  bool recompute_;
  Tensor input_;  // stash when recomputing
};

// Final RMSNorm and LM head: hidden (B, T, C) -> logits (B, T, V). `tied` (the embedding's
// table) is used as the head weight when non-null; otherwise the unit owns lm_head.weight.
class HeadUnit : public Unit {
 public:
  HeadUnit(const LlamaConfig& cfg, uint64_t seed, DType dtype, Device& device, Param* tied);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dlogits) override;
  void clear() override;
  void transfer_stash(StashTransfer& t) override;
  void collect(std::vector<Param*>& out) override;

 private:
  RmsNorm norm_;
  std::unique_ptr<Param> own_head_;  // null when tied
  Param* head_;                      // (V, C)
  Tensor h_;                         // stash: normed hidden (B*T, C)
};

}  // namespace h2::models
