// The CUDA backend's kernel table: every op, for f32, bf16 and f16 storage (FP32 arithmetic);
// copy and fill also move integer tensors (same dtype in and out); quantize, dequantize, dequantize
// and qmatmul take FP8/FP4 codes.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

// q: (B, T, H, D); the attention kernels tile D up to kMaxAttentionHeadDim.
std::string head_dim_refusal(const Tensor& q) {
  if (q.rank() != 4 || q.size(3) <= kMaxAttentionHeadDim) return {};
  return "head dim " + std::to_string(q.size(3)) + " > " + std::to_string(kMaxAttentionHeadDim);
}

KernelTable make_table() {
  KernelTable table;
  const DTypeSet floats{DType::f32, DType::bf16, DType::f16};
#define H2_OP(name, Args, layout, summary) \
  table.name = &cuda::name;                \
  table.name##_dtypes = floats;
#include "core/ops.def"
#undef H2_OP
  table.copy_dtypes = floats | DTypeSet{DType::i32, DType::i64, DType::u8};
  table.fill_dtypes = table.copy_dtypes;
  // quantize, dequantize and qmatmul are keyed by the codes' dtype (FP8 and FP4 elements).
  const DTypeSet codes{DType::f8e4m3, DType::f8e5m2, DType::f4e2m1};
  table.quantize_dtypes = codes;
  table.dequantize_dtypes = codes;
  table.qmatmul_dtypes = codes;
  table.attention_fwd_refusal = [](const AttentionFwdArgs& a) { return head_dim_refusal(a.q); };
  table.attention_bwd_refusal = [](const AttentionBwdArgs& a) { return head_dim_refusal(a.q); };
  return table;
}

}  // namespace

const KernelTable& cuda_kernel_table() {
  static const KernelTable table = make_table();
  return table;
}

}  // namespace h2::cuda
