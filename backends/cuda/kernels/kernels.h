// Entry points of the CUDA kernels, one per op in core/ops.def, grouped by the .cu file that
// implements them. Each assumes what its args struct documents (core/op_args.h), validates
// shapes with H2_CUDA_REQUIRE, makes the stream's device current and launches on the stream
// (asynchronously: nothing here waits for the GPU). Storage is f32, bf16 or f16; arithmetic is
// FP32 (reductions in double where the op says so).
#pragma once

#include "core/device.h"
#include "core/op_args.h"

namespace h2::cuda {

// copy_fill.cu
void copy(const CopyArgs& args, Stream& stream);
void fill(const FillArgs& args, Stream& stream);
// elementwise.cu
void add(const AddArgs& args, Stream& stream);
void swiglu_fwd(const SwigluFwdArgs& args, Stream& stream);
void swiglu_bwd(const SwigluBwdArgs& args, Stream& stream);
// reduce.cu
void sum(const SumArgs& args, Stream& stream);
void sum_squares(const SumArgs& args, Stream& stream);
// matmul.cu
void matmul(const MatmulArgs& args, Stream& stream);
// embedding.cu
void embedding_fwd(const EmbeddingFwdArgs& args, Stream& stream);
void embedding_bwd(const EmbeddingBwdArgs& args, Stream& stream);
// rms_norm.cu
void rms_norm_fwd(const RmsNormFwdArgs& args, Stream& stream);
void rms_norm_bwd(const RmsNormBwdArgs& args, Stream& stream);
// rope.cu
void rope_fwd(const RopeArgs& args, Stream& stream);
void rope_bwd(const RopeArgs& args, Stream& stream);
// attention_fwd.cu, attention_bwd.cu
void attention_fwd(const AttentionFwdArgs& args, Stream& stream);
void attention_bwd(const AttentionBwdArgs& args, Stream& stream);
// cross_entropy.cu
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, Stream& stream);
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, Stream& stream);
// adamw.cu
void adamw(const AdamwArgs& args, Stream& stream);

}  // namespace h2::cuda
