// Attention sub-layer forward/backward on matmul, rope, attention and add ops. Rotary embedding
// is applied in place (q, k are fresh tensors), and its gradient likewise in place on dq, dk.
#include "models/layers/attention.h"

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

Attention::Attention(const std::string& prefix, const LlamaConfig& cfg, uint64_t seed, DType dtype,
                     Device& device)
    : H_(cfg.n_heads),
      Hkv_(cfg.n_kv_heads),
      D_(cfg.head_dim()),
      theta_(cfg.rope_theta),
      rope_scaling_(cfg.rope_scaling),
      norm_(prefix + "input_layernorm.weight", cfg.dim, cfg.norm_eps, dtype, device),
      wq_(make_param(prefix + "self_attn.q_proj.weight", {H_ * D_, cfg.dim}, Init::normal, 0.02f,
                     seed, dtype, device)),
      wk_(make_param(prefix + "self_attn.k_proj.weight", {Hkv_ * D_, cfg.dim}, Init::normal, 0.02f,
                     seed, dtype, device)),
      wv_(make_param(prefix + "self_attn.v_proj.weight", {Hkv_ * D_, cfg.dim}, Init::normal, 0.02f,
                     seed, dtype, device)),
      wo_(make_param(prefix + "self_attn.o_proj.weight", {cfg.dim, H_ * D_}, Init::normal, 0.02f,
                     seed, dtype, device)) {}

Tensor Attention::forward(const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), N = B * T;
  Device& dev = x.device();
  const DType dt = x.dtype();
  Tensor h = norm_.forward(x).view({N, C});
  Tensor q = Tensor::empty({B, T, H_, D_}, dt, dev);
  Tensor k = Tensor::empty({B, T, Hkv_, D_}, dt, dev);
  Tensor v = Tensor::empty({B, T, Hkv_, D_}, dt, dev);
  SharedInput shared_h;  // q, k and v quantize h once between them
  wq_.forward(q.view({N, H_ * D_}), h, &shared_h);
  wk_.forward(k.view({N, Hkv_ * D_}), h, &shared_h);
  wv_.forward(v.view({N, Hkv_ * D_}), h, &shared_h);
  ops::rope_fwd({.out = q, .x = q, .theta = theta_, .scaling = rope_scaling_});
  ops::rope_fwd({.out = k, .x = k, .theta = theta_, .scaling = rope_scaling_});
  Tensor att = Tensor::empty({B, T, H_, D_}, dt, dev);
  Tensor lse = Tensor::empty({B, H_, T}, DType::f32, dev);
  ops::attention_fwd({.out = att, .lse = lse, .q = q, .k = k, .v = v});
  Tensor y = Tensor::empty(x.shape(), dt, dev);
  wo_.forward(y.view({N, C}), att.view({N, H_ * D_}));
  ops::add({.out = y, .a = y, .b = x});  // residual
  h_ = h, q_ = q, k_ = k, v_ = v, att_ = att, lse_ = lse;
  return y;
}

Tensor Attention::backward(const Tensor& dy) {
  if (!h_.defined()) throw Error("Attention " + wq_.param().name + ": backward without forward");
  const int64_t B = dy.size(0), T = dy.size(1), C = dy.size(2), N = B * T;
  Device& dev = dy.device();
  const DType dt = dy.dtype();
  Tensor dy2 = dy.view({N, C});
  Tensor datt = Tensor::empty({B, T, H_, D_}, dt, dev);
  wo_.backward(datt.view({N, H_ * D_}), dy2, att_.view({N, H_ * D_}));
  Tensor dq = Tensor::empty(q_.shape(), dt, dev);
  Tensor dk = Tensor::empty(k_.shape(), dt, dev);
  Tensor dv = Tensor::empty(v_.shape(), dt, dev);
  ops::attention_bwd({.dq = dq,
                      .dk = dk,
                      .dv = dv,
                      .dout = datt,
                      .q = q_,
                      .k = k_,
                      .v = v_,
                      .out = att_,
                      .lse = lse_});
  ops::rope_bwd({.out = dq, .x = dq, .theta = theta_, .scaling = rope_scaling_});
  ops::rope_bwd({.out = dk, .x = dk, .theta = theta_, .scaling = rope_scaling_});
  Tensor dh = Tensor::empty({N, C}, dt, dev);
  SharedInput shared_h;  // and h^T for their weight gradients
  wq_.backward(dh, dq.view({N, H_ * D_}), h_, false, &shared_h);
  wk_.backward(dh, dk.view({N, Hkv_ * D_}), h_, /*accumulate_dx=*/true, &shared_h);
  wv_.backward(dh, dv.view({N, Hkv_ * D_}), h_, /*accumulate_dx=*/true, &shared_h);
  h_ = q_ = k_ = v_ = att_ = lse_ = Tensor();
  Tensor dx = norm_.backward(dh.view({B, T, C}));
  ops::add({.out = dx, .a = dx, .b = dy});  // residual
  return dx;
}

void Attention::weight_backward() {
  SharedInput shared_h;  // q, k and v read the same h
  for (Linear* l : {&wq_, &wk_, &wv_}) l->weight_backward(&shared_h);
  wo_.weight_backward();
}

void Attention::clear() {
  norm_.clear();
  h_ = q_ = k_ = v_ = att_ = lse_ = Tensor();
}

void Attention::transfer_stash(StashTransfer& t) {
  norm_.transfer_stash(t);
  for (Tensor* member : {&h_, &q_, &k_, &v_, &att_, &lse_}) t(*member);
}

void Attention::collect(std::vector<Param*>& out) {
  out.insert(out.end(), {&norm_.weight(), &wq_.param(), &wk_.param(), &wv_.param(), &wo_.param()});
}

void Attention::collect_linears(std::vector<Linear*>& out) {
  out.insert(out.end(), {&wq_, &wk_, &wv_, &wo_});
}

}  // namespace h2::models
