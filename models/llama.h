// Llama: a decoder-only model as a list of units (embedding, L blocks, head), with the
// Hugging Face LlamaForCausalLM parameter names and layouts, and a whole-model API for
// single-process training (forward_backward) and generation (forward_logits).
// Holds no training state: master weights, optimizer moments and schedules live in train/.
// Compute dtype = the parameters' dtype (f32 or bf16); grads are f32 and accumulate until
// zero_grad(). Shapes: ids, targets (B*T) or (B, T) i32/i64; logits (B*T, V).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/lowp/precision_policy.h"
#include "models/llama_config.h"
#include "models/units.h"
#include "nn/loss.h"
#include "nn/model.h"

namespace h2::models {

struct NamedParameter {
  std::string name;
  Tensor param;  // shares storage with the model's weight
  Tensor grad;   // f32, shares storage with the model's gradient
};

struct LlamaOptions {
  DType dtype = DType::f32;
  uint64_t seed = 0;
  bool recompute = false;  // recompute every block's activations in backward
  // Where each unit (0 the embedding, 1.. the blocks, then the head) keeps its parameters: the
  // model's device when empty or when it returns null. A pipeline rank builds the units it does
  // not run on the host, so that a chip holds only its stages (initial values do not depend on
  // the device: parameters are keyed by name).
  std::function<Device*(int unit)> place;
};

class Llama final : public nn::Model {
 public:
  Llama(const LlamaConfig& cfg, Device& device, const LlamaOptions& options = {});
  Llama(const Llama&) = delete;
  Llama& operator=(const Llama&) = delete;

  const LlamaConfig& config() const { return cfg_; }
  Device& device() const override { return *device_; }
  DType dtype() const override { return dtype_; }
  int64_t hidden_size() const override { return cfg_.dim; }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  // The embedding table when the head shares it (tie_embeddings), else nullptr.
  nn::Param* tied_parameter() override;

  // Units in execution order: [embedding, block 0 .. block L-1, head].
  std::vector<Unit*> units() override;
  // Every parameter once, in Hugging Face order (no lm_head.weight when tied).
  std::vector<NamedParameter> named_parameters();
  int64_t num_parameters();
  void zero_grad();
  void set_recompute(bool on);
  // Every block's linear layers, block by block (q, k, v, o, gate, up, down).
  std::vector<Linear*> linears();
  // Sets each block linear's GEMM recipe for 0-based `step` (core/lowp/precision_policy.h).
  // Returns how many layers changed recipe.
  int apply_precision(const lowp::PrecisionPolicy& policy, int64_t step, int64_t total_steps);

  // One micro-batch: inputs, targets (B*T) i32/i64 on the model's device (targets may hold -100
  // = ignored). Returns the mean loss over non-ignored targets and ADDS grad_scale * d(mean
  // loss)/d(param) into every grad. Frees all activations before returning. When given,
  // `unit_done(u)` is called as soon as unit u (index into units()) finished its backward, so
  // its gradients are final for this micro-batch (data parallelism reduces them meanwhile).
  float forward_backward(const Tensor& inputs, const Tensor& targets, int64_t B, int64_t T,
                         float grad_scale = 1,
                         const std::function<void(size_t unit)>& unit_done = {});
  // Mean loss without gradients (evaluation).
  float loss(const Tensor& inputs, const Tensor& targets, int64_t B, int64_t T);
  // logits (B*T, V) in the compute dtype; keeps no activations.
  Tensor forward_logits(const Tensor& inputs, int64_t B, int64_t T);

 private:
  Tensor forward_all(const Tensor& inputs, int64_t B, int64_t T);
  void clear_all();

  LlamaConfig cfg_;
  Device* device_;
  DType dtype_;
  std::unique_ptr<EmbeddingUnit> embedding_;
  std::vector<std::unique_ptr<BlockUnit>> blocks_;
  std::unique_ptr<HeadUnit> head_;
};

}  // namespace h2::models
