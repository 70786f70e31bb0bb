// sum and sum_squares: in (any...) contiguous, any float dtype -> out: one f32 element.
// Two deterministic passes accumulated in double: a grid whose size depends only on numel
// writes one partial per block (fixed per-thread strides, fixed-order block tree), then one
// block adds the partials in a fixed order. Same input, same bits, on any GPU and any run.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

constexpr int kFinalThreads = 1024;
constexpr int64_t kMaxPartials = 1024;

template <bool kSquares>
__global__ void partial_sums_kernel(double* partials, FloatPtr in, int64_t n) {
  __shared__ double shared[32];
  double acc = 0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    double x = in.get(i);
    acc += kSquares ? x * x : x;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void final_sum_kernel(float* out, const double* partials, int count) {
  __shared__ double shared[32];
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) *out = float(acc);
}

template <bool kSquares>
void reduce(const SumArgs& args, Stream& stream, const char* op) {
  H2_CUDA_REQUIRE(args.out.numel() == 1,
                  str_cat("cuda ", op, ": out ", args.out.shape().str(), " is not one element"));
  float* out = f32_ptr(args.out, op, "out");
  FloatPtr in = float_ptr(args.in, op, "in");
  const int64_t n = args.in.numel();
  // A function of n alone, so that the summation order is too.
  const int blocks =
      int(std::clamp<int64_t>((n + 8 * kThreads - 1) / (8 * kThreads), 1, kMaxPartials));
  Launch launch(stream);
  Scratch<double> partials(stream, size_t(blocks));
  if (n > 0) {
    partial_sums_kernel<kSquares><<<blocks, kThreads, 0, launch.stream()>>>(partials.data(), in, n);
    H2_CUDA_LAUNCH_CHECK();
  }
  final_sum_kernel<<<1, kFinalThreads, 0, launch.stream()>>>(out, partials.data(),
                                                             n > 0 ? blocks : 0);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace

// in: (any...) -> out: () f32 = sum(in).
void sum(const SumArgs& args, Stream& stream) {
  reduce<false>(args, stream, "sum");
}

// in: (any...) -> out: () f32 = sum(in^2).
void sum_squares(const SumArgs& args, Stream& stream) {
  reduce<true>(args, stream, "sum_squares");
}

}  // namespace h2::cuda
