// Shared pieces of the attention kernels (attention_fwd.cu, attention_bwd.cu): shape checks,
// the head-dim dispatch and the cooperative tile loader. Layout and glossary: q, out, dq, dout
// (B, T, H, D); k, v, dk, dv (B, T, Hkv, D); lse (B, H, T) f32; query head h reads kv head
// h / (H / Hkv). Blocks have 4 warps. A block owns a tile of "rows" (queries in the forward and
// dq kernels, keys in the dk/dv kernel), RPW per warp, and streams the other side through shared
// memory 32 at a time, one per lane. Each lane also owns DPL of the D output dims (d = lane +
// 32 * i), so D <= 32 * DPL; DPL in {2, 4, 8} covers D <= 256.
#pragma once

#include <cmath>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {

constexpr int kAttnWarps = 4;
constexpr int kAttnThreads = 32 * kAttnWarps;
constexpr int kStreamTile = 32;  // streamed rows per step: one per lane

// Rows per warp: fewer for wide heads, to bound the per-lane accumulator registers.
template <int DPL>
inline constexpr int kRowsPerWarp = DPL <= 4 ? 8 : 4;

struct AttentionDims {
  int batch, seq, heads, kv_heads, head_dim;
  float scale;  // applied to q.k
};

// Validates q (B, T, H, D) and k, v (B, T, Hkv, D); resolves scale 0 to 1/sqrt(D).
inline AttentionDims attention_dims(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                                    const char* op) {
  H2_CUDA_REQUIRE(
      q.rank() == 4 && k.rank() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
          k.size(1) == q.size(1) && k.size(3) == q.size(3) && k.size(2) > 0 &&
          q.size(2) % k.size(2) == 0,
      str_cat("cuda ", op, ": q ", q.shape().str(), ", k ", k.shape().str(), ", v ",
              v.shape().str(), " are not (B, T, H, D), (B, T, Hkv, D) with H % Hkv == 0"));
  H2_CUDA_REQUIRE(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
                  str_cat("cuda ", op, ": q, k, v dtypes differ"));
  H2_CUDA_REQUIRE(q.size(0) < 65536 && q.size(2) < 65536 && q.size(1) < (int64_t(1) << 30),
                  str_cat("cuda ", op, ": q ", q.shape().str(), " exceeds the launch grid"));
  AttentionDims dims{int(q.size(0)), int(q.size(1)), int(q.size(2)),
                     int(k.size(2)), int(q.size(3)), scale};
  if (dims.scale == 0 && dims.head_dim > 0) dims.scale = 1.0f / std::sqrt(float(dims.head_dim));
  return dims;
}

// Calls fn(std::integral_constant<int, DPL>{}) with the smallest DPL that covers head_dim.
template <class Fn>
void visit_head_dim(int head_dim, const char* op, Fn&& fn) {
  if (head_dim <= 64) return fn(std::integral_constant<int, 2>{});
  if (head_dim <= 128) return fn(std::integral_constant<int, 4>{});
  static_assert(kMaxAttentionHeadDim == 256, "the tiles below cover head dims up to 256");
  if (head_dim <= 256) return fn(std::integral_constant<int, 8>{});
  throw_unsupported(__FILE__, __LINE__,
                    str_cat("cuda ", op, ": head dim ", head_dim, " > 256 is not implemented"));
}

// Block-cooperative: rows [0, rows) of a tile into shared memory as FP32 (times `mul`) with row
// pitch `pitch`; `src` is row 0, rows are `row_stride` elements apart, rows >= `valid` are 0.
template <class T>
__device__ void load_tile(float* dst, int pitch, const T* src, int64_t row_stride, int rows,
                          int valid, int dim, float mul) {
  for (int idx = threadIdx.x; idx < rows * dim; idx += blockDim.x) {
    const int r = idx / dim, d = idx - r * dim;
    dst[r * pitch + d] = r < valid ? load(src + r * row_stride + d) * mul : 0.0f;
  }
}

}  // namespace h2::cuda
