// RmsNorm layer: y = x * rsqrt(mean_c(x^2) + eps) * weight over the last dim (C).
// forward() stashes x and rstd for backward(); backward() adds dweight into weight.grad, returns
// dx and frees the stash. clear() frees it without a backward (inference, recomputation).
#pragma once

#include <string>
#include <vector>

#include "models/layers/param.h"

namespace h2::models {

class RmsNorm {
 public:
  RmsNorm(std::string name, int64_t dim, float eps, DType dtype, Device& device);

  Tensor forward(const Tensor& x);      // x: (N..., C) -> (N..., C)
  Tensor backward(const Tensor& dout);  // dout: (N..., C) -> dx (N..., C)
  void clear();
  void transfer_stash(StashTransfer& t) {
    t(x_);
    t(rstd_);
  }
  Param& weight() { return weight_; }

 private:
  Param weight_;  // (C)
  float eps_;
  Tensor x_, rstd_;  // stash: input (N..., C), rstd (N...) f32
};

}  // namespace h2::models
