// SwiGLU MLP sub-layer of a Llama block, with its pre-norm and residual:
//   h = RMSNorm(x); g = h Wg^T, u = h Wu^T; a = silu(g) * u; y = x + a Wd^T
// Shapes: x, y (B, T, C); g, u, a (B*T, F).
// forward() stashes h, g, u, a (and the norm's x, rstd); backward() adds every weight gradient
// into its Param's grad, returns dx and frees the stash.
#pragma once

#include <string>
#include <vector>

#include "models/layers/linear.h"
#include "models/layers/param.h"
#include "models/layers/rms_norm.h"
#include "models/llama_config.h"

namespace h2::models {

class Mlp {
 public:
  // prefix: "model.layers.{i}."
  Mlp(const std::string& prefix, const LlamaConfig& cfg, uint64_t seed, DType dtype,
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
  int64_t F_;
  RmsNorm norm_;
  Linear wg_, wu_, wd_;
  Tensor h_, g_, u_, a_;  // stash
};

}  // namespace h2::models
