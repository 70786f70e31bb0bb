// Argument structs of every op in core/ops.def: named fields, outputs first, shapes in comments.
// Kernels may assume what the comments state; the dispatcher (core/ops.cpp) has already checked
// that every defined tensor is on the op's device, and for kContiguous ops that it is contiguous.
// Each struct lists its tensors in slots() (for device checks, fallback and autocompare) and
// names its key_dtype(): the storage dtype that supports(device, op, dtype) is asked about.
#pragma once

#include <array>
#include <cstdint>

#include "core/lowp/quant_spec.h"
#include "core/rope_frequencies.h"
#include "core/tensor.h"

namespace h2 {

enum class TensorRole { in, out, inout };

struct TensorSlot {
  Tensor* tensor;
  TensorRole role;
  const char* name;
};

// out = in with dtype conversion (f32, bf16, f16 in any pair); same shape, any strides.
struct CopyArgs {
  Tensor out;
  Tensor in;
  auto slots() {
    return std::array<TensorSlot, 2>{{{&out, TensorRole::out, "out"}, {&in, TensorRole::in, "in"}}};
  }
  DType key_dtype() const { return out.dtype(); }
};

// out[...] = value (rounded to out's dtype); any strides.
struct FillArgs {
  Tensor out;
  double value = 0;
  auto slots() { return std::array<TensorSlot, 1>{{{&out, TensorRole::out, "out"}}}; }
  DType key_dtype() const { return out.dtype(); }
};

// out = alpha*a + beta*b; a, b, out: same shape; b may be undefined (then out = alpha*a).
// out may alias a or b (in-place residual add, gradient accumulation).
struct AddArgs {
  Tensor out;
  Tensor a;
  Tensor b;
  float alpha = 1;
  float beta = 1;
  auto slots() {
    return std::array<TensorSlot, 3>{
        {{&out, TensorRole::out, "out"}, {&a, TensorRole::in, "a"}, {&b, TensorRole::in, "b"}}};
  }
  DType key_dtype() const { return out.dtype(); }
};

// out: one f32 element (any shape of numel 1) = sum over in (sum) or of in^2 (sum_squares),
// accumulated in double. in: any shape.
struct SumArgs {
  Tensor out;
  Tensor in;
  auto slots() {
    return std::array<TensorSlot, 2>{{{&out, TensorRole::out, "out"}, {&in, TensorRole::in, "in"}}};
  }
  DType key_dtype() const { return in.dtype(); }
};

// out: (S..., M, N) = alpha * op(a) @ op(b) + beta * out, FP32 accumulation.
// a: (S..., M, K), or (S..., K, M) with trans_a.  b: (S..., K, N), or (S..., N, K) with trans_b.
// S... are batch dims, equal for all three; b may instead be rank 2 and shared over the batch
// (a linear layer's weight). a and b share one dtype; out has it too, or is f32 under bf16/f16
// inputs (the product rounded once, to f32: weight gradients accumulated straight into FP32).
// With beta == 0, out is not read.
struct MatmulArgs {
  Tensor out;
  Tensor a;
  Tensor b;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1;
  float beta = 0;
  auto slots() {
    return std::array<TensorSlot, 3>{
        {{&out, beta == 0 ? TensorRole::out : TensorRole::inout, "out"},
         {&a, TensorRole::in, "a"},
         {&b, TensorRole::in, "b"}}};
  }
  DType key_dtype() const { return a.dtype(); }
  // The dtype rule above: a and b share one; out has it too, or is f32 under bf16/f16 inputs.
  bool dtypes_agree() const {
    const DType in = a.dtype();
    const bool f32_of_16bit = out.dtype() == DType::f32 && (in == DType::bf16 || in == DType::f16);
    return b.dtype() == in && (out.dtype() == in || f32_of_16bit);
  }
};

// out: (N..., C) = table[ids]; table: (V, C); ids: (N...) i32 or i64, each in [0, V).
struct EmbeddingFwdArgs {
  Tensor out;
  Tensor table;
  Tensor ids;
  auto slots() {
    return std::array<TensorSlot, 3>{{{&out, TensorRole::out, "out"},
                                      {&table, TensorRole::in, "table"},
                                      {&ids, TensorRole::in, "ids"}}};
  }
  DType key_dtype() const { return table.dtype(); }
};

// dtable: (V, C) += scatter of dout (N..., C) by ids (N...); rows not named are unchanged.
struct EmbeddingBwdArgs {
  Tensor dtable;
  Tensor dout;
  Tensor ids;
  auto slots() {
    return std::array<TensorSlot, 3>{{{&dtable, TensorRole::inout, "dtable"},
                                      {&dout, TensorRole::in, "dout"},
                                      {&ids, TensorRole::in, "ids"}}};
  }
  DType key_dtype() const { return dtable.dtype(); }
};

// out: (N..., C) = x * rstd * weight with rstd = 1/sqrt(mean_c(x^2) + eps);
// rstd: (N...) f32, saved for backward; weight: (C).
struct RmsNormFwdArgs {
  Tensor out;
  Tensor rstd;
  Tensor x;
  Tensor weight;
  float eps = 1e-5f;
  auto slots() {
    return std::array<TensorSlot, 4>{{{&out, TensorRole::out, "out"},
                                      {&rstd, TensorRole::out, "rstd"},
                                      {&x, TensorRole::in, "x"},
                                      {&weight, TensorRole::in, "weight"}}};
  }
  DType key_dtype() const { return x.dtype(); }
};

// dx: (N..., C); dweight: (C) = sum_n dout * x * rstd (added to dweight when accumulate).
struct RmsNormBwdArgs {
  Tensor dx;
  Tensor dweight;
  Tensor dout;
  Tensor x;
  Tensor weight;
  Tensor rstd;
  bool accumulate = false;
  auto slots() {
    return std::array<TensorSlot, 6>{
        {{&dx, TensorRole::out, "dx"},
         {&dweight, accumulate ? TensorRole::inout : TensorRole::out, "dweight"},
         {&dout, TensorRole::in, "dout"},
         {&x, TensorRole::in, "x"},
         {&weight, TensorRole::in, "weight"},
         {&rstd, TensorRole::in, "rstd"}}};
  }
  DType key_dtype() const { return x.dtype(); }
};

// Rotary embedding, Hugging Face rotate_half convention, x/out: (B, T, H, D), D even.
// For i < D/2, angle = (position_offset + t) * inv_freq_i, inv_freq_i = theta^(-2i/D) or its
// Llama 3 scaling (core/rope_frequencies.h):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin
// rope_bwd applies the inverse rotation (angle -> -angle): dx from dout. out may alias x.
struct RopeArgs {
  Tensor out;
  Tensor x;
  float theta = 10000;
  int64_t position_offset = 0;
  RopeScaling scaling;  // factor 0: plain RoPE
  auto slots() {
    return std::array<TensorSlot, 2>{{{&out, TensorRole::out, "out"}, {&x, TensorRole::in, "x"}}};
  }
  DType key_dtype() const { return x.dtype(); }
};

// Causal scaled-dot-product attention with grouped-query heads.
// q: (B, T, H, D); k, v: (B, T, Hkv, D), H % Hkv == 0 (query head h reads kv head h / (H/Hkv));
// out: (B, T, H, D); lse: (B, H, T) f32, logsumexp of each query's scaled scores (for backward).
// scale 0 means 1/sqrt(D). Memory beyond the outputs does not grow with T^2.
struct AttentionFwdArgs {
  Tensor out;
  Tensor lse;
  Tensor q;
  Tensor k;
  Tensor v;
  float scale = 0;
  auto slots() {
    return std::array<TensorSlot, 5>{{{&out, TensorRole::out, "out"},
                                      {&lse, TensorRole::out, "lse"},
                                      {&q, TensorRole::in, "q"},
                                      {&k, TensorRole::in, "k"},
                                      {&v, TensorRole::in, "v"}}};
  }
  DType key_dtype() const { return q.dtype(); }
};

// Gradients of attention_fwd: dq like q; dk, dv like k, v (summed over each kv head's group).
struct AttentionBwdArgs {
  Tensor dq;
  Tensor dk;
  Tensor dv;
  Tensor dout;
  Tensor q;
  Tensor k;
  Tensor v;
  Tensor out;
  Tensor lse;
  float scale = 0;
  auto slots() {
    return std::array<TensorSlot, 9>{{{&dq, TensorRole::out, "dq"},
                                      {&dk, TensorRole::out, "dk"},
                                      {&dv, TensorRole::out, "dv"},
                                      {&dout, TensorRole::in, "dout"},
                                      {&q, TensorRole::in, "q"},
                                      {&k, TensorRole::in, "k"},
                                      {&v, TensorRole::in, "v"},
                                      {&out, TensorRole::in, "out"},
                                      {&lse, TensorRole::in, "lse"}}};
  }
  DType key_dtype() const { return q.dtype(); }
};

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)); all (N..., F).
struct SwigluFwdArgs {
  Tensor out;
  Tensor gate;
  Tensor up;
  auto slots() {
    return std::array<TensorSlot, 3>{{{&out, TensorRole::out, "out"},
                                      {&gate, TensorRole::in, "gate"},
                                      {&up, TensorRole::in, "up"}}};
  }
  DType key_dtype() const { return gate.dtype(); }
};

// dgate = dout * up * silu'(gate); dup = dout * silu(gate).
struct SwigluBwdArgs {
  Tensor dgate;
  Tensor dup;
  Tensor dout;
  Tensor gate;
  Tensor up;
  auto slots() {
    return std::array<TensorSlot, 5>{{{&dgate, TensorRole::out, "dgate"},
                                      {&dup, TensorRole::out, "dup"},
                                      {&dout, TensorRole::in, "dout"},
                                      {&gate, TensorRole::in, "gate"},
                                      {&up, TensorRole::in, "up"}}};
  }
  DType key_dtype() const { return gate.dtype(); }
};

// Per-row loss: logits (N, V); targets (N) i32/i64; losses (N) f32 = lse - logits[target],
// 0 where target == ignore_index; lse (N) f32 saved for backward. Other targets must be in [0, V).
struct CrossEntropyFwdArgs {
  Tensor losses;
  Tensor lse;
  Tensor logits;
  Tensor targets;
  int64_t ignore_index = -100;
  auto slots() {
    return std::array<TensorSlot, 4>{{{&losses, TensorRole::out, "losses"},
                                      {&lse, TensorRole::out, "lse"},
                                      {&logits, TensorRole::in, "logits"},
                                      {&targets, TensorRole::in, "targets"}}};
  }
  DType key_dtype() const { return logits.dtype(); }
};

// dlogits (N, V) = (softmax(logits) - onehot(target)) * dloss; rows with ignore_index are 0.
// dloss is the gradient of the total loss w.r.t. each row's loss (1/count for a mean).
struct CrossEntropyBwdArgs {
  Tensor dlogits;
  Tensor logits;
  Tensor lse;
  Tensor targets;
  float dloss = 1;
  int64_t ignore_index = -100;
  auto slots() {
    return std::array<TensorSlot, 4>{{{&dlogits, TensorRole::out, "dlogits"},
                                      {&logits, TensorRole::in, "logits"},
                                      {&lse, TensorRole::in, "lse"},
                                      {&targets, TensorRole::in, "targets"}}};
  }
  DType key_dtype() const { return logits.dtype(); }
};

// One AdamW step (decoupled weight decay, bias-corrected), all shapes equal (N...):
//   g = grad * grad_scale;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
//   param -= lr * (m/(1-b1^step) / (sqrt(v/(1-b2^step)) + eps) + weight_decay * param)
// param, m, v: f32 master state; grad: f32 or bf16; param_copy (optional): the updated param
// rounded to its own dtype (the BF16 compute copy). step >= 1.
struct AdamwArgs {
  Tensor param;
  Tensor m;
  Tensor v;
  Tensor param_copy;
  Tensor grad;
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0;
  float grad_scale = 1;
  int64_t step = 1;
  auto slots() {
    return std::array<TensorSlot, 5>{{{&param, TensorRole::inout, "param"},
                                      {&m, TensorRole::inout, "m"},
                                      {&v, TensorRole::inout, "v"},
                                      {&param_copy, TensorRole::out, "param_copy"},
                                      {&grad, TensorRole::in, "grad"}}};
  }
  DType key_dtype() const { return grad.dtype(); }
};

// Quantizes in (R, K), or in^T when transpose (in is then (K, R)), into q per q.spec (see
// core/lowp/quant_spec.h for the scale rules); in: f32 or bf16. q's tensors are outputs.
// multiplier > 0 imposes the f32_amax multiplier for a per-tensor spec (delayed scaling);
// stochastic rounds element (r, k) with counter_random(seed, first_index + r * K + k).
// stats (optional, f32 (2)): [0] = amax of in, [1] = elements saturated (or overflowed).
struct QuantizeArgs {
  lowp::QTensor q;
  Tensor stats;
  Tensor in;
  bool transpose = false;
  float multiplier = 0;
  bool stochastic = false;
  uint64_t seed = 0;
  uint64_t first_index = 0;
  lowp::Overflow overflow = lowp::Overflow::saturate;
  auto slots() {
    return std::array<TensorSlot, 5>{{{&q.codes, TensorRole::out, "codes"},
                                      {&q.scales, TensorRole::out, "scales"},
                                      {&q.global, TensorRole::out, "global"},
                                      {&stats, TensorRole::out, "stats"},
                                      {&in, TensorRole::in, "in"}}};
  }
  DType key_dtype() const { return q.codes.dtype(); }
};

// out (R, K) = deq(q): each code times its block's scale (core/lowp/quant_spec.h); out: f32,
// bf16 or f16. What a receiver of FP8-compressed activations runs.
struct DequantizeArgs {
  Tensor out;
  lowp::QTensor q;
  auto slots() {
    return std::array<TensorSlot, 4>{{{&out, TensorRole::out, "out"},
                                      {&q.codes, TensorRole::in, "codes"},
                                      {&q.scales, TensorRole::in, "scales"},
                                      {&q.global, TensorRole::in, "global"}}};
  }
  DType key_dtype() const { return q.codes.dtype(); }
};

// out (M, N) = alpha * deq(a) @ deq(b)^T + beta * out; a: (M, K), b: (N, K) quantized (any
// specs, each block_cols a multiple of the other's or whole K); products of dequantized values
// accumulated in FP32 (what an FP8/FP4 tensor-core GEMM computes, up to summation order).
// out: f32 or bf16; with beta == 0 it is not read.
struct QMatmulArgs {
  Tensor out;
  lowp::QTensor a;
  lowp::QTensor b;
  float alpha = 1;
  float beta = 0;
  auto slots() {
    return std::array<TensorSlot, 7>{
        {{&out, beta == 0 ? TensorRole::out : TensorRole::inout, "out"},
         {&a.codes, TensorRole::in, "a.codes"},
         {&a.scales, TensorRole::in, "a.scales"},
         {&a.global, TensorRole::in, "a.global"},
         {&b.codes, TensorRole::in, "b.codes"},
         {&b.scales, TensorRole::in, "b.scales"},
         {&b.global, TensorRole::in, "b.global"}}};
  }
  DType key_dtype() const { return a.codes.dtype(); }
};

}  // namespace h2
