// RMSNorm forward and backward over the last dim. Shapes: x, out, dout, dx (N..., C); weight,
// dweight (C); rstd (N...) f32. One block per row for the row-wise parts (FP32 sums in a fixed
// block tree). dweight = sum over rows of dout * x * rstd is reduced deterministically: row
// chunks (their count a function of N alone) write FP32 partials per column, then one pass adds
// the partials in chunk order (and the old dweight when accumulating).
//   dx = rstd * w * dout - x * rstd^3 / C * sum_c(w * dout * x)
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kColumns = 32;  // dweight: columns per block (one per lane)
constexpr int kRowLanes = 8;  // dweight: row strides per block
constexpr int64_t kMaxChunks = 256;

__global__ void rms_norm_fwd_kernel(FloatPtr out, float* rstd, FloatPtr x, FloatPtr weight,
                                    int64_t channels, float eps) {
  __shared__ float shared[32];
  const int64_t base = int64_t(blockIdx.x) * channels;
  float ss = 0;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    float v = x.get(base + c);
    ss += v * v;
  }
  ss = block_sum(ss, shared);
  const float r = 1.0f / sqrtf(ss / float(channels) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x)
    out.set(base + c, x.get(base + c) * r * weight.get(c));
}

__global__ void rms_norm_dx_kernel(FloatPtr dx, FloatPtr dout, FloatPtr x, FloatPtr weight,
                                   const float* rstd, int64_t channels) {
  __shared__ float shared[32];
  const int64_t base = int64_t(blockIdx.x) * channels;
  float dot = 0;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x)
    dot += weight.get(c) * dout.get(base + c) * x.get(base + c);
  dot = block_sum(dot, shared);
  const float r = rstd[blockIdx.x];
  const float k = r * r * r * dot / float(channels);
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x)
    dx.set(base + c, r * weight.get(c) * dout.get(base + c) - x.get(base + c) * k);
}

// Block (column group, row chunk): partials[chunk][c] = sum over the chunk's rows.
__global__ void rms_norm_dweight_partial_kernel(float* partials, FloatPtr dout, FloatPtr x,
                                                const float* rstd, int64_t rows, int64_t channels,
                                                int64_t rows_per_chunk) {
  __shared__ float shared[kRowLanes][kColumns + 1];
  const int64_t c = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = min(rows, begin + rows_per_chunk);
  float acc = 0;
  if (c < channels)
    for (int64_t n = begin + threadIdx.y; n < end; n += kRowLanes)
      acc += dout.get(n * channels + c) * x.get(n * channels + c) * rstd[n];
  shared[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float total = 0;
    for (int i = 0; i < kRowLanes; ++i) total += shared[i][threadIdx.x];
    partials[int64_t(blockIdx.y) * channels + c] = total;
  }
}

__global__ void rms_norm_dweight_final_kernel(FloatPtr dweight, const float* partials,
                                              int64_t chunks, int64_t channels, bool accumulate) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    float total = 0;
    for (int64_t i = 0; i < chunks; ++i) total += partials[i * channels + c];
    dweight.set(c, accumulate ? dweight.get(c) + total : total);
  }
}

}  // namespace

// x: (N..., C), weight: (C) -> out: (N..., C), rstd: (N...) f32.
void rms_norm_fwd(const RmsNormFwdArgs& args, Stream& stream) {
  const char* op = "rms_norm_fwd";
  require_same_shape(args.out, args.x, op, "out", "x");
  const int64_t channels = args.x.rank() > 0 ? args.x.size(-1) : 1;
  H2_CUDA_REQUIRE(args.weight.numel() == channels && args.rstd.numel() * channels == args.x.numel(),
                  str_cat("cuda rms_norm_fwd: x ", args.x.shape().str(), ", weight ",
                          args.weight.shape().str(), ", rstd ", args.rstd.shape().str()));
  const int64_t rows = channels > 0 ? args.x.numel() / channels : 0;
  float* rstd = f32_ptr(args.rstd, op, "rstd");
  if (rows == 0) return;
  H2_CUDA_REQUIRE(channels > 0, "cuda rms_norm_fwd: C == 0");
  Launch launch(stream);
  rms_norm_fwd_kernel<<<unsigned(rows), kRowThreads, 0, launch.stream()>>>(
      float_ptr(args.out, op, "out"), rstd, float_ptr(args.x, op, "x"),
      float_ptr(args.weight, op, "weight"), channels, args.eps);
  H2_CUDA_LAUNCH_CHECK();
}

// dout, x: (N..., C), weight: (C), rstd: (N...) -> dx: (N..., C), dweight: (C).
void rms_norm_bwd(const RmsNormBwdArgs& args, Stream& stream) {
  const char* op = "rms_norm_bwd";
  require_same_shape(args.dx, args.x, op, "dx", "x");
  require_same_shape(args.dout, args.x, op, "dout", "x");
  const int64_t channels = args.x.rank() > 0 ? args.x.size(-1) : 1;
  H2_CUDA_REQUIRE(
      args.weight.numel() == channels && args.dweight.numel() == channels &&
          args.rstd.numel() * channels == args.x.numel(),
      str_cat("cuda rms_norm_bwd: x ", args.x.shape().str(), ", weight ", args.weight.shape().str(),
              ", dweight ", args.dweight.shape().str(), ", rstd ", args.rstd.shape().str()));
  if (channels == 0) return;
  const int64_t rows = args.x.numel() / channels;
  const float* rstd = f32_ptr(args.rstd, op, "rstd");
  FloatPtr dout = float_ptr(args.dout, op, "dout"), x = float_ptr(args.x, op, "x");
  Launch launch(stream);
  if (rows > 0) {
    rms_norm_dx_kernel<<<unsigned(rows), kRowThreads, 0, launch.stream()>>>(
        float_ptr(args.dx, op, "dx"), dout, x, float_ptr(args.weight, op, "weight"), rstd,
        channels);
    H2_CUDA_LAUNCH_CHECK();
  }
  // Chunking depends on N alone, so the summation order does too.
  const int64_t chunks = std::clamp<int64_t>((rows + 63) / 64, rows > 0 ? 1 : 0, kMaxChunks);
  const int64_t rows_per_chunk = chunks > 0 ? (rows + chunks - 1) / chunks : 0;
  Scratch<float> partials(stream, size_t(std::max<int64_t>(chunks, 1) * channels));
  if (chunks > 0) {
    dim3 grid(unsigned((channels + kColumns - 1) / kColumns), unsigned(chunks));
    rms_norm_dweight_partial_kernel<<<grid, dim3(kColumns, kRowLanes), 0, launch.stream()>>>(
        partials.data(), dout, x, rstd, rows, channels, rows_per_chunk);
    H2_CUDA_LAUNCH_CHECK();
  }
  rms_norm_dweight_final_kernel<<<grid_for(channels), kThreads, 0, launch.stream()>>>(
      float_ptr(args.dweight, op, "dweight"), partials.data(), chunks, channels, args.accumulate);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
