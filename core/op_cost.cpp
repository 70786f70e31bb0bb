// FLOP and byte counts per op (see op_cost.h). Element-wise ops count a handful of FLOPs per
// element; they are bandwidth-bound, so the byte count decides their modelled time.
#include "core/op_cost.h"

namespace h2 {
namespace {

double bytes_of(const Tensor& t) {
  return t.defined() ? double(t.nbytes()) : 0.0;
}

template <class Args>
double all_bytes(Args args) {
  double total = 0;
  for (const TensorSlot& slot : args.slots()) total += bytes_of(*slot.tensor);
  return total;
}

template <class Args>
OpCost elementwise(const Args& args, double flops_per_element, const Tensor& shape_of) {
  return {flops_per_element * double(shape_of.numel()), all_bytes(args), shape_of.dtype()};
}

}  // namespace

OpCost op_cost_copy(const CopyArgs& a) {
  return elementwise(a, 0, a.out);
}
OpCost op_cost_fill(const FillArgs& a) {
  return elementwise(a, 0, a.out);
}
OpCost op_cost_add(const AddArgs& a) {
  return elementwise(a, 3, a.out);
}
OpCost op_cost_sum(const SumArgs& a) {
  return elementwise(a, 1, a.in);
}
OpCost op_cost_sum_squares(const SumArgs& a) {
  return elementwise(a, 2, a.in);
}

OpCost op_cost_matmul(const MatmulArgs& a) {
  // out (S..., M, N); K is the contracted extent of a.
  int64_t k = a.trans_a ? a.a.size(-2) : a.a.size(-1);
  double flops = 2.0 * double(a.out.numel()) * double(k);
  double bytes = bytes_of(a.a) + bytes_of(a.b) + bytes_of(a.out) * (a.beta != 0 ? 2 : 1);
  return {flops, bytes, a.a.dtype()};  // the inputs' dtype sets the rate (f32 out of bf16 too)
}

OpCost op_cost_embedding_fwd(const EmbeddingFwdArgs& a) {
  return {0, 2 * bytes_of(a.out) + bytes_of(a.ids), a.out.dtype()};
}
OpCost op_cost_embedding_bwd(const EmbeddingBwdArgs& a) {
  return {double(a.dout.numel()), 3 * bytes_of(a.dout) + bytes_of(a.ids), a.dout.dtype()};
}
OpCost op_cost_rms_norm_fwd(const RmsNormFwdArgs& a) {
  return elementwise(a, 4, a.x);
}
OpCost op_cost_rms_norm_bwd(const RmsNormBwdArgs& a) {
  return elementwise(a, 8, a.x);
}
OpCost op_cost_rope_fwd(const RopeArgs& a) {
  return elementwise(a, 3, a.x);
}
OpCost op_cost_rope_bwd(const RopeArgs& a) {
  return elementwise(a, 3, a.x);
}

namespace {
// Causal attention does half the work of full attention: T*(T+1)/2 query-key pairs.
double attention_pairs(const Tensor& q) {
  double t = double(q.size(1));
  return double(q.size(0)) * double(q.size(2)) * t * (t + 1) / 2;
}
}  // namespace

OpCost op_cost_attention_fwd(const AttentionFwdArgs& a) {
  double d = double(a.q.size(3));
  return {4 * d * attention_pairs(a.q), all_bytes(a), a.q.dtype()};  // QK^T and PV
}
OpCost op_cost_attention_bwd(const AttentionBwdArgs& a) {
  double d = double(a.q.size(3));
  return {10 * d * attention_pairs(a.q), all_bytes(a), a.q.dtype()};  // QK^T again + 4 GEMMs
}

OpCost op_cost_swiglu_fwd(const SwigluFwdArgs& a) {
  return elementwise(a, 6, a.out);
}
OpCost op_cost_swiglu_bwd(const SwigluBwdArgs& a) {
  return elementwise(a, 10, a.dout);
}
OpCost op_cost_cross_entropy_fwd(const CrossEntropyFwdArgs& a) {
  return elementwise(a, 4, a.logits);
}
OpCost op_cost_cross_entropy_bwd(const CrossEntropyBwdArgs& a) {
  return elementwise(a, 4, a.logits);
}
OpCost op_cost_adamw(const AdamwArgs& a) {
  return elementwise(a, 16, a.param);
}

// quantize: read in, write codes, scales and stats (all_bytes); per element an |x|, a max, the
// multiply by the block's multiplier and the rounding: about 4 FLOPs. Counted at the input's
// dtype (vector units, not the low-precision GEMM peak).
OpCost op_cost_quantize(const QuantizeArgs& a) {
  return {4 * double(a.in.numel()), all_bytes(a), a.in.dtype()};
}

OpCost op_cost_dequantize(const DequantizeArgs& a) {
  return {double(a.out.numel()), all_bytes(a), a.out.dtype()};
}

// qmatmul: 2*M*N*K at the a operand's element dtype (f8e4m3, f8e5m2, f4e2m1), so a chip with an
// FP8 peak is paced at it (vchip falls back to its f32 peak where it has none); bytes of both
// operands' codes and scales, and out (read too when beta != 0).
OpCost op_cost_qmatmul(const QMatmulArgs& a) {
  const double k = a.a.codes.defined() ? double(a.a.codes.size(-1)) : 0.0;
  const double operands = bytes_of(a.a.codes) + bytes_of(a.a.scales) + bytes_of(a.a.global) +
                          bytes_of(a.b.codes) + bytes_of(a.b.scales) + bytes_of(a.b.global);
  return {2.0 * double(a.out.numel()) * k, operands + bytes_of(a.out) * (a.beta != 0 ? 2 : 1),
          a.a.codes.dtype()};
}

}  // namespace h2
