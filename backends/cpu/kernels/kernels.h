// Entry points of the CPU kernels, one per op in core/ops.def, grouped by the file that
// implements them. Each assumes what its args struct documents (core/op_args.h) and validates
// shapes with H2_CHECK. Storage is f32, bf16 or f16; arithmetic is FP32 (reductions wider).
#pragma once

#include "core/device.h"
#include "core/op_args.h"

namespace h2::cpu {

// copy_fill.cpp
void copy(const CopyArgs& args, Stream& stream);
void fill(const FillArgs& args, Stream& stream);
// elementwise.cpp
void add(const AddArgs& args, Stream& stream);
void swiglu_fwd(const SwigluFwdArgs& args, Stream& stream);
void swiglu_bwd(const SwigluBwdArgs& args, Stream& stream);
// reduce.cpp
void sum(const SumArgs& args, Stream& stream);
void sum_squares(const SumArgs& args, Stream& stream);
// matmul.cpp
void matmul(const MatmulArgs& args, Stream& stream);
// embedding.cpp
void embedding_fwd(const EmbeddingFwdArgs& args, Stream& stream);
void embedding_bwd(const EmbeddingBwdArgs& args, Stream& stream);
// rms_norm.cpp
void rms_norm_fwd(const RmsNormFwdArgs& args, Stream& stream);
void rms_norm_bwd(const RmsNormBwdArgs& args, Stream& stream);
// rope.cpp
void rope_fwd(const RopeArgs& args, Stream& stream);
void rope_bwd(const RopeArgs& args, Stream& stream);
// attention_fwd.cpp, attention_bwd.cpp
void attention_fwd(const AttentionFwdArgs& args, Stream& stream);
void attention_bwd(const AttentionBwdArgs& args, Stream& stream);
// cross_entropy.cpp
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, Stream& stream);
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, Stream& stream);
// adamw.cpp
void adamw(const AdamwArgs& args, Stream& stream);

}  // namespace h2::cpu
