// MLP sub-layer forward/backward on matmul, swiglu and add ops.
#include "models/layers/mlp.h"

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

Mlp::Mlp(const std::string& prefix, const LlamaConfig& cfg, uint64_t seed, DType dtype,
         Device& device)
    : F_(cfg.ffn_dim),
      norm_(prefix + "post_attention_layernorm.weight", cfg.dim, cfg.norm_eps, dtype, device),
      gate_up_({make_param(prefix + "mlp.gate_proj.weight", {F_, cfg.dim}, Init::normal, 0.02f,
                           seed, dtype, device),
                make_param(prefix + "mlp.up_proj.weight", {F_, cfg.dim}, Init::normal, 0.02f, seed,
                           dtype, device)}),
      wd_(make_param(prefix + "mlp.down_proj.weight", {cfg.dim, F_}, Init::normal, 0.02f, seed,
                     dtype, device)) {}

Mlp::GateUp Mlp::make_gate_up(int64_t N, DType dtype, Device& device) const {
  GateUp t;
  if (gate_up_.fused()) {
    t.both = Tensor::empty({N, 2 * F_}, dtype, device);
    t.g = t.both.slice(1, 0, F_);
    t.u = t.both.slice(1, F_, 2 * F_);
  } else {
    t.g = Tensor::empty({N, F_}, dtype, device);
    t.u = Tensor::empty({N, F_}, dtype, device);
  }
  return t;
}

Tensor Mlp::forward(const Tensor& x) {
  const int64_t C = x.size(2), N = x.size(0) * x.size(1);
  Device& dev = x.device();
  const DType dt = x.dtype();
  Tensor h = norm_.forward(x).view({N, C});
  const GateUp p = make_gate_up(N, dt, dev);
  if (p.both.defined()) {
    gate_up_.forward(p.both, h);
  } else {
    gate_up_.forward({p.g, p.u}, h);
  }
  Tensor a = Tensor::empty({N, F_}, dt, dev);
  ops::swiglu_fwd({.out = a, .gate = p.g, .up = p.u});
  Tensor y = Tensor::empty(x.shape(), dt, dev);
  wd_.forward(y.view({N, C}), a);
  ops::add({.out = y, .a = y, .b = x});  // residual
  h_ = h, g_ = p.g, u_ = p.u, a_ = a;
  return y;
}

Tensor Mlp::backward(const Tensor& dy) {
  if (!h_.defined()) throw Error("Mlp " + gate_up_[0].module() + ": backward without forward");
  const int64_t B = dy.size(0), T = dy.size(1), C = dy.size(2), N = B * T;
  Device& dev = dy.device();
  const DType dt = dy.dtype();
  Tensor da = Tensor::empty({N, F_}, dt, dev);
  wd_.backward(da, dy.view({N, C}), a_);
  const GateUp d = make_gate_up(N, dt, dev);
  ops::swiglu_bwd({.dgate = d.g, .dup = d.u, .dout = da, .gate = g_, .up = u_});
  Tensor dh = Tensor::empty({N, C}, dt, dev);
  if (d.both.defined()) {
    gate_up_.backward(dh, d.both, h_);
  } else {
    gate_up_.backward(dh, {d.g, d.u}, h_);
  }
  h_ = g_ = u_ = a_ = Tensor();
  Tensor dx = norm_.backward(dh.view({B, T, C}));
  ops::add({.out = dx, .a = dx, .b = dy});  // residual
  return dx;
}

void Mlp::weight_backward() {
  gate_up_.weight_backward();
  wd_.weight_backward();
}

void Mlp::clear() {
  norm_.clear();
  h_ = g_ = u_ = a_ = Tensor();
}

void Mlp::transfer_stash(StashTransfer& t) {
  norm_.transfer_stash(t);
  for (Tensor* member : {&h_, &g_, &u_, &a_}) t(*member);
}

void Mlp::collect(std::vector<Param*>& out) {
  out.insert(out.end(),
             {&norm_.weight(), &gate_up_[0].param(), &gate_up_[1].param(), &wd_.param()});
}

void Mlp::collect_linears(std::vector<Linear*>& out) {
  out.insert(out.end(), {&gate_up_[0], &gate_up_[1], &wd_});
}

}  // namespace h2::models
