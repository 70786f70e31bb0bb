// CUDA qmatmul: out (M, N) = alpha * deq(a) @ deq(b)^T + beta * out for quantized a (M, K) and
// b (N, K) (core/lowp/quant_spec.h), products accumulated in FP32. A plain tiled kernel, written
// for correctness rather than speed (no tensor cores): Hopper's FP8 GEMMs take per-tensor scales
// only, and FP4 is emulated there anyway.
//
// Shapes: M rows of a and out, N rows of b (columns of out), K the reduction extent. A thread
// block computes a kTile x kTile tile of out with kThreadsPerSide^2 threads, kPer x kPer outputs
// each (rows ty + 16 i, columns tx + 16 j). For each K step of kStep columns it decodes the
// matching kTile x kStep pieces of a and b into shared memory as FP32, element = decode(code) *
// its block's scale (f32, 2^(e - 127), or decode_e4m3(sb) * g), then accumulates their products.
#include <cstdint>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/quant_operand.cuh"
#include "core/lowp/format_codec.h"
#include "core/lowp/quant_check.h"

namespace h2::cuda {
namespace {

using lowp::Format;
using lowp::ScaleRule;

constexpr int kTile = 64;
constexpr int kStep = 32;
constexpr int kThreadsPerSide = 16;
constexpr int kPer = kTile / kThreadsPerSide;  // 4

__global__ void qmatmul_kernel(FloatPtr out, QOperand a, QOperand b, float alpha, float beta) {
  __shared__ float as[kStep][kTile + 1];
  __shared__ float bs[kStep][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kThreadsPerSide + tx;
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  float acc[kPer][kPer] = {};
  for (int64_t k0 = 0; k0 < a.K; k0 += kStep) {
    for (int e = tid; e < kTile * kStep; e += kThreadsPerSide * kThreadsPerSide) {
      const int row = e / kStep, kk = e % kStep;
      as[kk][row] = dequantized(a, m0 + row, k0 + kk);
      bs[kk][row] = dequantized(b, n0 + row, k0 + kk);
    }
    __syncthreads();
    for (int kk = 0; kk < kStep; ++kk)
      for (int i = 0; i < kPer; ++i)
        for (int j = 0; j < kPer; ++j)
          acc[i][j] += as[kk][ty + kThreadsPerSide * i] * bs[kk][tx + kThreadsPerSide * j];
    __syncthreads();
  }
  const int64_t M = a.rows, N = b.rows;
  for (int i = 0; i < kPer; ++i)
    for (int j = 0; j < kPer; ++j) {
      const int64_t m = m0 + ty + kThreadsPerSide * i, n = n0 + tx + kThreadsPerSide * j;
      if (m >= M || n >= N) continue;
      const float v = alpha * acc[i][j];
      out.set(m * N + n, beta == 0.0f ? v : v + beta * out.get(m * N + n));
    }
}

}  // namespace

// out (M, N) f32/bf16/f16 = alpha * deq(a (M, K)) @ deq(b (N, K))^T + beta * out.
void qmatmul(const QMatmulArgs& args, Stream& stream) {
  const char* op = "qmatmul";
  lowp::check_qtensor(args.a, op, "a");
  lowp::check_qtensor(args.b, op, "b");
  FloatPtr out = float_ptr(args.out, op, "out");
  const int64_t M = args.a.rows(), N = args.b.rows();
  H2_CUDA_REQUIRE(
      args.out.rank() == 2 && args.out.size(0) == M && args.out.size(1) == N &&
          args.a.cols() == args.b.cols(),
      str_cat("cuda qmatmul: out ", args.out.shape().str(), " = a ", args.a.codes.shape().str(),
              " @ b ", args.b.codes.shape().str(), "^T does not fit"));
  H2_CUDA_REQUIRE((M + kTile - 1) / kTile <= 65535,
                  str_cat("cuda qmatmul: M = ", M, " exceeds the grid's y extent"));
  if (M == 0 || N == 0) return;
  Launch launch(stream);
  const dim3 grid(unsigned((N + kTile - 1) / kTile), unsigned((M + kTile - 1) / kTile));
  const dim3 block(kThreadsPerSide, kThreadsPerSide);
  qmatmul_kernel<<<grid, block, 0, launch.stream()>>>(out, make_operand(args.a),
                                                      make_operand(args.b), args.alpha, args.beta);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
