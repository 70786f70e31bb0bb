// CUDA dequantize: out (R, K) = deq(q), each element decode(code) * its block's scale, written in
// out's dtype (f32, bf16 or f16). One thread per element; grid-stride loop.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/quant_operand.cuh"
#include "core/lowp/quant_check.h"

namespace h2::cuda {
namespace {

__global__ void dequantize_kernel(FloatPtr out, QOperand q) {
  const int64_t n = q.rows * q.K;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out.set(i, dequantized(q, i / q.K, i % q.K));
}

}  // namespace

void dequantize(const DequantizeArgs& args, Stream& stream) {
  const char* op = "dequantize";
  lowp::check_qtensor(args.q, op, "q");
  FloatPtr out = float_ptr(args.out, op, "out");
  H2_CUDA_REQUIRE(args.out.rank() == 2 && args.out.size(0) == args.q.rows() &&
                      args.out.size(1) == args.q.cols(),
                  str_cat("cuda dequantize: out ", args.out.shape().str(),
                          " must have the codes' shape ", args.q.codes.shape().str()));
  const int64_t n = args.q.rows() * args.q.cols();
  if (n == 0) return;
  Launch launch(stream);
  const int threads = 256;
  const auto blocks = unsigned(std::min<int64_t>((n + threads - 1) / threads, 65535));
  dequantize_kernel<<<blocks, threads, 0, launch.stream()>>>(out, make_operand(args.q));
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
