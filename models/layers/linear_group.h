// LinearGroup: the linear layers that read one input (q, k and v of attention; gate and up of the
// MLP) and whether their GEMMs run as one. They do where every layer runs in the compute dtype and
// the weights lie end to end, as the group lays them out and FSDP's flat buffers keep them: the
// forward then writes x [W1; W2; ...]^T into one (N, O1 + O2 + ...) tensor whose column blocks
// are the layers' outputs, dgrad reads their gradients from one such tensor, and wgrad adds
// dy^T x into the joined weight gradients. One GEMM instead of one per layer reads x once, forks
// once and, on CPUs without bf16 instructions, widens x (and rounds dx) once. Under a
// low-precision recipe, whose scales, statistics and amax histories are per layer, each layer runs
// its own GEMMs, sharing x's quantizations (SharedInput).
// Shapes: x (N, I); layer i's weight (O_i, I) and output (N, O_i); fused output (N, sum O_i).
#pragma once

#include <initializer_list>
#include <vector>

#include "models/layers/linear.h"

namespace h2::models {

class LinearGroup {
 public:
  // The layers of these weights, which move into one allocation (values and gradients each).
  explicit LinearGroup(std::vector<Param> weights);

  Linear& operator[](size_t i) { return layers_[i]; }
  size_t size() const { return layers_.size(); }

  // Whether the GEMMs run as one now: no layer quantized, weights end to end.
  bool fused() const;

  // Fused: out (N, sum O_i) = x W^T, W the weights stacked.
  void forward(const Tensor& out, const Tensor& x);
  // Each layer: outs[i] (N, O_i) = x W_i^T.
  void forward(std::initializer_list<Tensor> outs, const Tensor& x);
  // Fused: dx = dy W for dy (N, sum O_i); the weight gradients += dy^T x, in one GEMM, or each
  // layer's block of dy queued while weight gradients are deferred.
  void backward(const Tensor& dx, const Tensor& dy, const Tensor& x);
  // Each layer: dx = sum_i dys[i] W_i; weight gradients as Linear::backward.
  void backward(const Tensor& dx, std::initializer_list<Tensor> dys, const Tensor& x);
  // Each layer's oldest deferred weight gradient (Linear::weight_backward), sharing x^T's
  // quantization.
  void weight_backward();

 private:
  Tensor joined_values() const;
  std::vector<Linear> layers_;
};

}  // namespace h2::models
