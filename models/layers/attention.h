// Attention sub-layer of a Llama block, with its pre-norm and residual:
//   h = RMSNorm(x); q = h Wq^T, k = h Wk^T, v = h Wv^T; q, k = RoPE(q, k);
//   a = CausalGQA(q, k, v); y = x + a Wo^T
// Shapes: x, y (B, T, C); q (B, T, H, D); k, v (B, T, Hkv, D); a (B, T, H, D).
// forward() stashes what backward() needs (x, rstd, h, rotated q/k, v, a, lse); backward()
// adds every weight gradient into its Param's grad, returns dx and frees the stash.
#pragma once

#include <string>
#include <vector>

#include "models/layers/linear.h"
#include "models/layers/param.h"
#include "models/layers/rms_norm.h"
#include "models/llama_config.h"

namespace h2::models {

class Attention {
 public:
  // prefix: "model.layers.{i}."
  Attention(const std::string& prefix, const LlamaConfig& cfg, uint64_t seed, DType dtype,
            Device& device);

  Tensor forward(const Tensor& x);    // (B, T, C) -> (B, T, C)
  Tensor backward(const Tensor& dy);  // (B, T, C) -> dx (B, T, C)
  // The oldest deferred weight gradients of its linears (Linear::set_defer_weight_grad), the
  // layers that read one input sharing x^T's quantization as in backward.
  void weight_backward();
  void clear();
  void transfer_stash(StashTransfer& t);
  void collect(std::vector<Param*>& out);
  void collect_linears(std::vector<Linear*>& out);

 private:
  int64_t H_, Hkv_, D_;
  float theta_;
  RopeScaling rope_scaling_;
  RmsNorm norm_;
  Linear wq_, wk_, wv_, wo_;
  Tensor h_, q_, k_, v_, att_, lse_;  // stash
};

}  // namespace h2::models
