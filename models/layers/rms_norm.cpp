// RmsNorm forward/backward on the rms_norm_fwd/bwd ops (dweight accumulates in f32).
#include "models/layers/rms_norm.h"

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

RmsNorm::RmsNorm(std::string name, int64_t dim, float eps, DType dtype, Device& device)
    : weight_(make_param(std::move(name), {dim}, Init::ones, 0, 0, dtype, device)), eps_(eps) {}

Tensor RmsNorm::forward(const Tensor& x) {
  Shape rows;
  for (int d = 0; d + 1 < x.rank(); ++d) rows.push_back(x.size(d));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty(rows, DType::f32, x.device());
  ops::rms_norm_fwd({.out = out, .rstd = rstd, .x = x, .weight = weight_.value, .eps = eps_});
  x_ = x;
  rstd_ = rstd;
  return out;
}

Tensor RmsNorm::backward(const Tensor& dout) {
  if (!x_.defined()) throw Error("RmsNorm " + weight_.name + ": backward without forward");
  Tensor dx = Tensor::empty(x_.shape(), x_.dtype(), x_.device());
  ops::rms_norm_bwd({.dx = dx,
                     .dweight = weight_.grad,
                     .dout = dout,
                     .x = x_,
                     .weight = weight_.value,
                     .rstd = rstd_,
                     .accumulate = true});
  clear();
  return dx;
}

void RmsNorm::clear() {
  x_ = Tensor();
  rstd_ = Tensor();
}

}  // namespace h2::models
