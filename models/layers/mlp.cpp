// MLP sub-layer forward/backward on matmul, swiglu and add ops.
#include "models/layers/mlp.h"

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

Mlp::Mlp(const std::string& prefix, const LlamaConfig& cfg, uint64_t seed, DType dtype,
         Device& device)
    : F_(cfg.ffn_dim),
      norm_(prefix + "post_attention_layernorm.weight", cfg.dim, cfg.norm_eps, dtype, device),
      wg_(make_param(prefix + "mlp.gate_proj.weight", {F_, cfg.dim}, Init::normal, 0.02f, seed,
                     dtype, device)),
      wu_(make_param(prefix + "mlp.up_proj.weight", {F_, cfg.dim}, Init::normal, 0.02f, seed, dtype,
                     device)),
      wd_(make_param(prefix + "mlp.down_proj.weight", {cfg.dim, F_}, Init::normal, 0.02f, seed,
                     dtype, device)) {}

Tensor Mlp::forward(const Tensor& x) {
  const int64_t C = x.size(2), N = x.size(0) * x.size(1);
  Device& dev = x.device();
  const DType dt = x.dtype();
  Tensor h = norm_.forward(x).view({N, C});
  Tensor g = Tensor::empty({N, F_}, dt, dev);
  Tensor u = Tensor::empty({N, F_}, dt, dev);
  SharedInput shared_h;  // gate and up quantize h once between them
  wg_.forward(g, h, &shared_h);
  wu_.forward(u, h, &shared_h);
  Tensor a = Tensor::empty({N, F_}, dt, dev);
  ops::swiglu_fwd({.out = a, .gate = g, .up = u});
  Tensor y = Tensor::empty(x.shape(), dt, dev);
  wd_.forward(y.view({N, C}), a);
  ops::add({.out = y, .a = y, .b = x});  // residual
  h_ = h, g_ = g, u_ = u, a_ = a;
  return y;
}

Tensor Mlp::backward(const Tensor& dy) {
  if (!h_.defined()) throw Error("Mlp " + wg_.param().name + ": backward without forward");
  const int64_t B = dy.size(0), T = dy.size(1), C = dy.size(2), N = B * T;
  Device& dev = dy.device();
  const DType dt = dy.dtype();
  Tensor da = Tensor::empty({N, F_}, dt, dev);
  wd_.backward(da, dy.view({N, C}), a_);
  Tensor dg = Tensor::empty({N, F_}, dt, dev);
  Tensor du = Tensor::empty({N, F_}, dt, dev);
  ops::swiglu_bwd({.dgate = dg, .dup = du, .dout = da, .gate = g_, .up = u_});
  Tensor dh = Tensor::empty({N, C}, dt, dev);
  SharedInput shared_h;  // and h^T for their weight gradients
  wg_.backward(dh, dg, h_, false, &shared_h);
  wu_.backward(dh, du, h_, /*accumulate_dx=*/true, &shared_h);
  h_ = g_ = u_ = a_ = Tensor();
  Tensor dx = norm_.backward(dh.view({B, T, C}));
  ops::add({.out = dx, .a = dx, .b = dy});  // residual
  return dx;
}

void Mlp::weight_backward() {
  SharedInput shared_h;  // gate and up read the same h
  wg_.weight_backward(&shared_h);
  wu_.weight_backward(&shared_h);
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
  out.insert(out.end(), {&norm_.weight(), &wg_.param(), &wu_.param(), &wd_.param()});
}

void Mlp::collect_linears(std::vector<Linear*>& out) {
  out.insert(out.end(), {&wg_, &wu_, &wd_});
}

}  // namespace h2::models
