// Plain double-precision reference implementations of every op in core/ops.def, written as
// naive loops straight from the formulas in core/op_args.h and independent of any kernel. All
// tensors are flat row-major std::vector<double>; shapes are passed as extents. The conformance
// suite feeds them the dtype-rounded inputs; the gradient checks differentiate them numerically.
#pragma once

#include <cstdint>
#include <vector>

namespace h2::ref {

using Vec = std::vector<double>;
using Ids = std::vector<int64_t>;

// out = alpha*a + beta*b (b may be null: out = alpha*a).
Vec add(const Vec& a, const Vec* b, double alpha, double beta);
double sum(const Vec& x);
double sum_squares(const Vec& x);

// Batched matmul: out (S, M, N) = alpha * op(a) @ op(b) + beta * out. a is (S, M, K) or
// (S, K, M) with trans_a; b is (S, K, N) or (S, N, K) with trans_b, or shared over S when
// b_shared (then b has no batch dim). With beta == 0 `out` is not read (it may be empty).
struct MatmulDims {
  int64_t S = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false, b_shared = false;
};
Vec matmul(const Vec& a, const Vec& b, const Vec& out, const MatmulDims& d, double alpha,
           double beta);

// table (V, C); ids (N) -> out (N, C).
Vec embedding_fwd(const Vec& table, const Ids& ids, int64_t C);
// dtable (V, C) += scatter of dout (N, C) by ids.
void embedding_bwd(Vec& dtable, const Vec& dout, const Ids& ids, int64_t C);

// x (N, C), weight (C) -> out (N, C), rstd (N).
struct RmsNormOut {
  Vec out, rstd;
};
RmsNormOut rms_norm_fwd(const Vec& x, const Vec& weight, int64_t C, double eps);
// Exact gradients of rms_norm_fwd given dout (rstd recomputed from x in double).
struct RmsNormGrads {
  Vec dx, dweight;
};
RmsNormGrads rms_norm_bwd(const Vec& dout, const Vec& x, const Vec& weight, int64_t C, double eps);

// x (B, T, H, D) rotated by angle (offset + t) * theta^(-2i/D), or by `inv_freq` (D/2 values)
// when given; direction -1 is rope_bwd.
Vec rope(const Vec& x, int64_t B, int64_t T, int64_t H, int64_t D, double theta, int64_t offset,
         int direction, const Vec& inv_freq = {});

// Llama 3.1's scaled inverse frequencies (Meta's apply_scaling, written from its definition: high
// frequencies kept, low ones divided by `factor`, blended linearly in 1/wavelength between).
Vec llama3_inv_freq(int64_t D, double theta, double factor, double low_freq_factor,
                    double high_freq_factor, double original_max_positions);

// Causal GQA attention: q (B, T, H, D), k/v (B, T, Hkv, D); scale 0 means 1/sqrt(D).
struct AttnDims {
  int64_t B = 1, T = 1, H = 1, Hkv = 1, D = 1;
  double scale = 0;
  double effective_scale() const;
};
struct AttnOut {
  Vec out, lse;  // out (B, T, H, D); lse (B, H, T)
};
AttnOut attention_fwd(const Vec& q, const Vec& k, const Vec& v, const AttnDims& d);
// Gradients given dout; `out` is the forward output used for D_i = dout_i . out_i (the kernel's
// saved tensor: pass the exact one for gradient checks, the stored one for conformance).
struct AttnGrads {
  Vec dq, dk, dv;
};
AttnGrads attention_bwd(const Vec& dout, const Vec& q, const Vec& k, const Vec& v, const Vec& out,
                        const AttnDims& d);

Vec swiglu_fwd(const Vec& gate, const Vec& up);
struct SwigluGrads {
  Vec dgate, dup;
};
SwigluGrads swiglu_bwd(const Vec& dout, const Vec& gate, const Vec& up);

// logits (N, V), targets (N) -> losses (N), lse (N); ignored rows have loss 0.
struct CrossEntropyOut {
  Vec losses, lse;
};
CrossEntropyOut cross_entropy_fwd(const Vec& logits, const Ids& targets, int64_t V,
                                  int64_t ignore_index);
Vec cross_entropy_bwd(const Vec& logits, const Ids& targets, int64_t V, double dloss,
                      int64_t ignore_index);

struct AdamwHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0, grad_scale = 1;
};
// One AdamW step in place on (param, m, v).
void adamw_step(Vec& param, Vec& m, Vec& v, const Vec& grad, const AdamwHyper& h, int64_t step);

}  // namespace h2::ref
