// Fused log-softmax + NLL per row and its gradient. Shapes: logits, dlogits (N, V); targets (N)
// i32/i64; losses, lse (N) f32. One block per row. The forward keeps an online (max, sum of
// exp(x - max)) pair per thread and combines pairs in a fixed xor-butterfly / block tree order,
// so one pass over V suffices and results are deterministic. Rows whose target is ignore_index
// get loss 0 and dlogits 0 (their lse is still written); other targets must be in [0, V)
// (out-of-range targets give a NaN loss rather than an out-of-bounds read).
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

constexpr int kRowThreads = 512;

// log-sum-exp state: max m and s = sum exp(x - m). An empty state is (-inf, 0).
struct Lse {
  float m, s;
};

__device__ __forceinline__ Lse combine(Lse a, Lse b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};  // exp(-inf) = 0 for empty sides
}

__device__ Lse block_lse(Lse v, Lse* shared) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine(
        v, {__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)});
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? shared[lane] : Lse{-INFINITY, 0.0f};
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine(
        v, {__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)});
  return v;
}

__global__ void cross_entropy_fwd_kernel(float* losses, float* lse, FloatPtr logits,
                                         IndexPtr targets, int64_t vocab, int64_t ignore_index) {
  __shared__ Lse shared[32];
  const int64_t row = blockIdx.x, base = row * vocab;
  Lse acc{-INFINITY, 0.0f};
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    acc = combine(acc, {logits.get(base + v), 1.0f});
  acc = block_lse(acc, shared);
  if (threadIdx.x != 0) return;
  const float row_lse = acc.m + logf(acc.s);
  lse[row] = row_lse;
  const int64_t target = targets.get(row);
  if (target == ignore_index)
    losses[row] = 0.0f;
  else if (target >= 0 && target < vocab)
    losses[row] = row_lse - logits.get(base + target);
  else
    losses[row] = NAN;
}

__global__ void cross_entropy_bwd_kernel(FloatPtr dlogits, FloatPtr logits, const float* lse,
                                         IndexPtr targets, int64_t vocab, float dloss,
                                         int64_t ignore_index) {
  const int64_t row = blockIdx.x, base = row * vocab;
  const int64_t target = targets.get(row);
  const bool ignored = target == ignore_index;
  const float row_lse = lse[row];
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    float grad = 0.0f;
    if (!ignored)
      grad = (expf(logits.get(base + v) - row_lse) - (v == target ? 1.0f : 0.0f)) * dloss;
    dlogits.set(base + v, grad);
  }
}

void check_shapes(const Tensor& logits, const Tensor& targets, const Tensor& per_row,
                  const Tensor& lse, const char* op) {
  H2_CUDA_REQUIRE(logits.rank() == 2 && targets.numel() == logits.size(0) &&
                      lse.numel() == logits.size(0) &&
                      (!per_row.defined() || per_row.numel() == logits.size(0)),
                  str_cat("cuda ", op, ": logits ", logits.shape().str(), ", targets ",
                          targets.shape().str(), ", lse ", lse.shape().str()));
}

}  // namespace

// logits: (N, V), targets: (N) -> losses: (N) f32, lse: (N) f32.
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, Stream& stream) {
  const char* op = "cross_entropy_fwd";
  check_shapes(args.logits, args.targets, args.losses, args.lse, op);
  const int64_t rows = args.logits.size(0), vocab = args.logits.size(1);
  float* losses = f32_ptr(args.losses, op, "losses");
  float* lse = f32_ptr(args.lse, op, "lse");
  if (rows == 0) return;
  H2_CUDA_REQUIRE(vocab > 0, "cuda cross_entropy_fwd: V == 0");
  Launch launch(stream);
  cross_entropy_fwd_kernel<<<unsigned(rows), kRowThreads, 0, launch.stream()>>>(
      losses, lse, float_ptr(args.logits, op, "logits"), index_ptr(args.targets, op, "targets"),
      vocab, args.ignore_index);
  H2_CUDA_LAUNCH_CHECK();
}

// logits: (N, V), lse: (N), targets: (N) -> dlogits: (N, V).
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, Stream& stream) {
  const char* op = "cross_entropy_bwd";
  check_shapes(args.logits, args.targets, Tensor(), args.lse, op);
  require_same_shape(args.dlogits, args.logits, op, "dlogits", "logits");
  const int64_t rows = args.logits.size(0), vocab = args.logits.size(1);
  const float* lse = f32_ptr(args.lse, op, "lse");
  if (rows == 0 || vocab == 0) return;
  Launch launch(stream);
  cross_entropy_bwd_kernel<<<unsigned(rows), kRowThreads, 0, launch.stream()>>>(
      float_ptr(args.dlogits, op, "dlogits"), float_ptr(args.logits, op, "logits"), lse,
      index_ptr(args.targets, op, "targets"), vocab, args.dloss, args.ignore_index);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
