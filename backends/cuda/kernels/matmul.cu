// Batched matmul through cublasGemmStridedBatchedEx with FP32 accumulation (CUBLAS_COMPUTE_32F:
// tensor cores for bf16/f16, plain FP32 for f32, never TF32).
// Shapes: out (S..., M, N) = alpha * op(a) @ op(b) + beta * out; a (S..., M, K) or (S..., K, M)
// with trans_a; b (S..., K, N) or (S..., N, K) with trans_b, or rank 2 and shared over S.
// Row-major to cuBLAS's column-major: a row-major (R, C) matrix is a column-major (C, R) one, so
// out^T = op(b)^T @ op(a)^T is computed with cuBLAS's A = b, B = a, m = N, n = M.
// A shared b without trans_a folds the batch into M (one large GEMM); with trans_a it is a
// strided batch with b's stride 0.
#include <climits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

cudaDataType_t cublas_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      throw_unsupported(__FILE__, __LINE__,
                        str_cat("cuda matmul: dtype ", dtype_name(dtype), " is not f32/bf16/f16"));
  }
}

// out *= beta (K == 0: the product is empty). With beta == 0, out is not read.
__global__ void scale_kernel(FloatPtr out, float beta, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    out.set(i, beta == 0.0f ? 0.0f : beta * out.get(i));
}

int to_int(int64_t value, const char* what) {
  H2_CUDA_REQUIRE(value <= INT_MAX,
                  str_cat("cuda matmul: ", what, " = ", value, " exceeds cuBLAS's int range"));
  return int(value);
}

}  // namespace

// a: (S..., M, K) @ b: (S..., K, N) or (K, N) -> out: (S..., M, N), FP32 accumulation; out
// has a's dtype, or f32 under bf16/f16 inputs (cuBLAS's Ctype CUDA_R_32F).
void matmul(const MatmulArgs& args, Stream& stream) {
  const Tensor& out = args.out;
  const Tensor& a = args.a;
  const Tensor& b = args.b;
  const char* op = "matmul";
  H2_CUDA_REQUIRE(out.rank() >= 2 && a.rank() == out.rank(),
                  str_cat("cuda matmul: out ", out.shape().str(), ", a ", a.shape().str()));
  H2_CUDA_REQUIRE(
      args.dtypes_agree(),
      str_cat("cuda matmul: a and b must share a dtype, out too or f32 under bf16/f16 "
              "inputs: ",
              dtype_name(a.dtype()), ", ", dtype_name(b.dtype()), ", ", dtype_name(out.dtype())));
  const bool shared_b = b.rank() == 2 && out.rank() > 2;
  H2_CUDA_REQUIRE(b.rank() == out.rank() || shared_b,
                  str_cat("cuda matmul: b ", b.shape().str(), " for out ", out.shape().str()));
  const int64_t m = out.size(-2), n = out.size(-1);
  const int64_t k = args.trans_a ? a.size(-2) : a.size(-1);
  const int64_t a_m = args.trans_a ? a.size(-1) : a.size(-2);
  const int64_t b_k = args.trans_b ? b.size(-1) : b.size(-2);
  const int64_t b_n = args.trans_b ? b.size(-2) : b.size(-1);
  H2_CUDA_REQUIRE(
      a_m == m && b_k == k && b_n == n,
      str_cat("cuda matmul: a ", a.shape().str(), (args.trans_a ? "^T" : ""), " @ b ",
              b.shape().str(), (args.trans_b ? "^T" : ""), " -> out ", out.shape().str()));
  for (int d = 0; d < out.rank() - 2; ++d) {
    H2_CUDA_REQUIRE(a.size(d) == out.size(d) && (shared_b || b.size(d) == out.size(d)),
                    str_cat("cuda matmul: batch dims of a ", a.shape().str(), ", b ",
                            b.shape().str(), ", out ", out.shape().str()));
  }
  if (m == 0 || n == 0) return;
  int64_t batch = out.numel() / (m * n);
  if (batch == 0) return;
  Launch launch(stream);
  if (k == 0) {
    const int64_t count = out.numel();
    scale_kernel<<<grid_for(count), kThreads, 0, launch.stream()>>>(float_ptr(out, op, "out"),
                                                                    args.beta, count);
    H2_CUDA_LAUNCH_CHECK();
    return;
  }
  int64_t rows = m;  // rows of op(a) per GEMM
  if (shared_b && !args.trans_a) {
    rows = m * batch;  // (S..., M, K) is one (S*M, K) matrix
    batch = 1;
  }
  const cudaDataType_t type = cublas_type(a.dtype());  // a's and b's
  const cudaDataType_t out_type = cublas_type(out.dtype());
  const cublasOperation_t op_b = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t ld_b = args.trans_b ? k : n;
  const int64_t ld_a = args.trans_a ? m : k;
  const long long stride_b = shared_b ? 0 : k * n;
  const long long stride_a = m * k;
  const long long stride_out = m * n;
  const float alpha = args.alpha, beta = args.beta;
  H2_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      launch.cuda_stream().cublas(), op_b, op_a, to_int(n, "N"), to_int(rows, "M"), to_int(k, "K"),
      &alpha, b.data(), type, to_int(ld_b, "ldb"), stride_b, a.data(), type, to_int(ld_a, "lda"),
      stride_a, &beta, out.data(), out_type, to_int(n, "ldc"), stride_out, to_int(batch, "batch"),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace h2::cuda
