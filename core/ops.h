// The op API: h2::ops::NAME(args, stream) for every op in core/ops.def, declared one by one below
// so that a search finds each (core/ops.cpp fails to compile when one is missing), e.g.
//   ops::rms_norm_fwd({.out = y, .rstd = r, .x = x, .weight = w, .eps = 1e-5f});
// Runs on the device of the op's tensors (all must share one), on `stream` or that device's
// default stream. Unsupported (device, op, dtype) throws UnsupportedError unless the op is in
// H2_FALLBACK_OPS (then it runs on the CPU with copies and a warning); ops in H2_CHECK_OPS are
// shadow-run on the CPU and mismatches logged. copy and fill never fall back: they are the
// mechanism fallback itself uses.
#pragma once

#include "core/device.h"
#include "core/op_args.h"
#include "core/op_catalogue.h"

namespace h2::ops {

// out = in, converting dtype; any strides.
void copy(const CopyArgs& args, Stream* stream = nullptr);
// out[...] = value.
void fill(const FillArgs& args, Stream* stream = nullptr);
// out = alpha*a + beta*b (b optional).
void add(const AddArgs& args, Stream* stream = nullptr);
// out() = sum(in), FP32 result.
void sum(const SumArgs& args, Stream* stream = nullptr);
// out() = sum(in^2), FP32 result (gradient norms).
void sum_squares(const SumArgs& args, Stream* stream = nullptr);
// out = alpha*op(a)@op(b) + beta*out, batched.
void matmul(const MatmulArgs& args, Stream* stream = nullptr);
// out[n] = table[ids[n]].
void embedding_fwd(const EmbeddingFwdArgs& args, Stream* stream = nullptr);
// dtable[ids[n]] += dout[n].
void embedding_bwd(const EmbeddingBwdArgs& args, Stream* stream = nullptr);
// out = x * rsqrt(mean(x^2) + eps) * weight.
void rms_norm_fwd(const RmsNormFwdArgs& args, Stream* stream = nullptr);
// dx, dweight of rms_norm_fwd.
void rms_norm_bwd(const RmsNormBwdArgs& args, Stream* stream = nullptr);
// rotary embedding, Hugging Face rotate_half.
void rope_fwd(const RopeArgs& args, Stream* stream = nullptr);
// inverse rotation: gradient of rope_fwd.
void rope_bwd(const RopeArgs& args, Stream* stream = nullptr);
// causal SDPA, grouped-query heads, blocked.
void attention_fwd(const AttentionFwdArgs& args, Stream* stream = nullptr);
// dq, dk, dv of attention_fwd.
void attention_bwd(const AttentionBwdArgs& args, Stream* stream = nullptr);
// out = silu(gate) * up.
void swiglu_fwd(const SwigluFwdArgs& args, Stream* stream = nullptr);
// dgate, dup of swiglu_fwd.
void swiglu_bwd(const SwigluBwdArgs& args, Stream* stream = nullptr);
// fused log-softmax + NLL per row, ignore index.
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, Stream* stream = nullptr);
// dlogits = (softmax - onehot) * dloss.
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, Stream* stream = nullptr);
// AdamW step on FP32 master weights.
void adamw(const AdamwArgs& args, Stream* stream = nullptr);
// FP8/FP4 codes and block scales of a matrix.
void quantize(const QuantizeArgs& args, Stream* stream = nullptr);
// out = codes times their block scales, f32/bf16/f16.
void dequantize(const DequantizeArgs& args, Stream* stream = nullptr);
// out = alpha*deq(a)@deq(b)^T + beta*out, FP32 accumulation.
void qmatmul(const QMatmulArgs& args, Stream* stream = nullptr);

}  // namespace h2::ops
