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
      qkv_({make_param(prefix + "self_attn.q_proj.weight", {H_ * D_, cfg.dim}, Init::normal, 0.02f,
                       seed, dtype, device),
            make_param(prefix + "self_attn.k_proj.weight", {Hkv_ * D_, cfg.dim}, Init::normal,
                       0.02f, seed, dtype, device),
            make_param(prefix + "self_attn.v_proj.weight", {Hkv_ * D_, cfg.dim}, Init::normal,
                       0.02f, seed, dtype, device)}),
      wo_(make_param(prefix + "self_attn.o_proj.weight", {cfg.dim, H_ * D_}, Init::normal, 0.02f,
                     seed, dtype, device)) {}

std::vector<Tensor> Attention::Heads::rotated(int64_t H, int64_t Hkv) const {
  if (all.defined()) return {all.slice(2, 0, H + Hkv)};
  return {q, k};
}

Attention::Heads Attention::make_heads(int64_t B, int64_t T, DType dtype, Device& device) const {
  Heads heads;
  if (qkv_.fused()) {
    heads.all = Tensor::empty({B, T, H_ + 2 * Hkv_, D_}, dtype, device);
    heads.q = heads.all.slice(2, 0, H_);
    heads.k = heads.all.slice(2, H_, H_ + Hkv_);
    heads.v = heads.all.slice(2, H_ + Hkv_, H_ + 2 * Hkv_);
  } else {
    heads.q = Tensor::empty({B, T, H_, D_}, dtype, device);
    heads.k = Tensor::empty({B, T, Hkv_, D_}, dtype, device);
    heads.v = Tensor::empty({B, T, Hkv_, D_}, dtype, device);
  }
  return heads;
}

Tensor Attention::forward(const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), N = B * T;
  Device& dev = x.device();
  const DType dt = x.dtype();
  Tensor h = norm_.forward(x).view({N, C});
  const Heads p = make_heads(B, T, dt, dev);
  if (p.all.defined()) {
    qkv_.forward(p.all.view({N, -1}), h);
  } else {
    qkv_.forward({p.q.view({N, H_ * D_}), p.k.view({N, Hkv_ * D_}), p.v.view({N, Hkv_ * D_})}, h);
  }
  for (const Tensor& t : p.rotated(H_, Hkv_))
    ops::rope_fwd({.out = t, .x = t, .theta = theta_, .scaling = rope_scaling_});
  Tensor att = Tensor::empty({B, T, H_, D_}, dt, dev);
  Tensor lse = Tensor::empty({B, H_, T}, DType::f32, dev);
  ops::attention_fwd({.out = att, .lse = lse, .q = p.q, .k = p.k, .v = p.v});
  Tensor y = Tensor::empty(x.shape(), dt, dev);
  wo_.forward(y.view({N, C}), att.view({N, H_ * D_}));
  ops::add({.out = y, .a = y, .b = x});  // residual
  h_ = h, q_ = p.q, k_ = p.k, v_ = p.v, att_ = att, lse_ = lse;
  return y;
}

Tensor Attention::backward(const Tensor& dy) {
  if (!h_.defined()) throw Error("Attention " + qkv_[0].module() + ": backward without forward");
  const int64_t B = dy.size(0), T = dy.size(1), C = dy.size(2), N = B * T;
  Device& dev = dy.device();
  const DType dt = dy.dtype();
  Tensor dy2 = dy.view({N, C});
  Tensor datt = Tensor::empty({B, T, H_, D_}, dt, dev);
  wo_.backward(datt.view({N, H_ * D_}), dy2, att_.view({N, H_ * D_}));
  const Heads g = make_heads(B, T, dt, dev);
  ops::attention_bwd({.dq = g.q,
                      .dk = g.k,
                      .dv = g.v,
                      .dout = datt,
                      .q = q_,
                      .k = k_,
                      .v = v_,
                      .out = att_,
                      .lse = lse_});
  for (const Tensor& t : g.rotated(H_, Hkv_))
    ops::rope_bwd({.out = t, .x = t, .theta = theta_, .scaling = rope_scaling_});
  Tensor dh = Tensor::empty({N, C}, dt, dev);
  if (g.all.defined()) {
    qkv_.backward(dh, g.all.view({N, -1}), h_);
  } else {
    qkv_.backward(dh, {g.q.view({N, H_ * D_}), g.k.view({N, Hkv_ * D_}), g.v.view({N, Hkv_ * D_})},
                  h_);
  }
  h_ = q_ = k_ = v_ = att_ = lse_ = Tensor();
  Tensor dx = norm_.backward(dh.view({B, T, C}));
  ops::add({.out = dx, .a = dx, .b = dy});  // residual
  return dx;
}

void Attention::weight_backward() {
  qkv_.weight_backward();
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
  out.insert(out.end(),
             {&norm_.weight(), &qkv_[0].param(), &qkv_[1].param(), &qkv_[2].param(), &wo_.param()});
}

void Attention::collect_linears(std::vector<Linear*>& out) {
  out.insert(out.end(), {&qkv_[0], &qkv_[1], &qkv_[2], &wo_});
}

}  // namespace h2::models
