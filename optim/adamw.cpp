// AdamW with FP32 master weights (see adamw.h).
#include "optim/adamw.h"

#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::optim {

AdamW::AdamW(std::vector<ParamRef> params, AdamwOptions options)
    : params_(std::move(params)), options_(options) {
  state_.reserve(params_.size());
  for (const ParamRef& p : params_) {
    H2_CHECK(p.param.defined() && p.grad.defined(), "AdamW: parameter '{}' has no tensor or grad",
             p.name);
    H2_CHECK(p.param.shape() == p.grad.shape(), "AdamW: '{}' is {} but its grad is {}", p.name,
             p.param.shape().str(), p.grad.shape().str());
    Device& device = p.param.device();
    State s;
    s.master = p.param.dtype() == DType::f32 ? p.param : p.param.to(DType::f32);
    s.m = Tensor::zeros(p.param.shape(), DType::f32, device);
    s.v = Tensor::zeros(p.param.shape(), DType::f32, device);
    state_.push_back(std::move(s));
  }
}

std::vector<double> AdamW::grad_sum_squares() const {
  std::vector<double> sums;
  for (const ParamRef& p : params_) {
    Tensor sq = Tensor::empty({1}, DType::f32, p.grad.device());
    ops::sum_squares({.out = sq, .in = p.grad});
    sums.push_back(double(tensor_to_floats(sq)[0]));
  }
  return sums;
}

double AdamW::grad_norm() const {
  double total = 0;
  for (double s : grad_sum_squares()) total += s;
  return std::sqrt(total);
}

void AdamW::step(double lr, double grad_scale) {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    State& s = state_[i];
    bool separate_copy = s.master.data() != p.param.data();
    ops::adamw({.param = s.master,
                .m = s.m,
                .v = s.v,
                .param_copy = separate_copy ? p.param : Tensor(),
                .grad = p.grad,
                .lr = float(lr),
                .beta1 = float(options_.beta1),
                .beta2 = float(options_.beta2),
                .eps = float(options_.eps),
                .weight_decay = p.param.rank() >= 2 ? float(options_.weight_decay) : 0.0f,
                .grad_scale = float(grad_scale),
                .step = step_});
  }
}

void AdamW::sync_params_from_masters() {
  for (size_t i = 0; i < params_.size(); ++i)
    if (state_[i].master.data() != params_[i].param.data())
      params_[i].param.copy_from(state_[i].master);
}

void AdamW::zero_grad() {
  for (const ParamRef& p : params_) ops::fill({.out = p.grad, .value = 0.0});
}

double clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

}  // namespace h2::optim
