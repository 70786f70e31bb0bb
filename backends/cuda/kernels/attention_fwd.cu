// Causal scaled-dot-product attention forward, flash style: one block per (query tile, h, b),
// online softmax, K/V tiles of 32 keys staged in shared memory; nothing of size T^2 exists.
// Shapes: q, out (B, T, H, D); k, v (B, T, Hkv, D); lse (B, H, T) f32 (logsumexp of the scaled
// scores, saved for the backward). FP32 math on SIMT cores (no tensor cores): correctness first.
// Per key tile, lane j scores key j against the warp's RPW queries (q pre-scaled, broadcast
// from shared memory), the warp updates each query's running max, and then accumulates p @ V
// with each lane owning DPL output dims. Each lane keeps its own partial of the softmax
// denominator (rescaled like the accumulators); the lanes' partials are summed at the end.
#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

template <class T, int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    attention_fwd_kernel(T* out, float* lse, const T* q, const T* k, const T* v,
                         AttentionDims dims) {
  constexpr int RPW = kRowsPerWarp<DPL>;
  constexpr int kRows = kAttnWarps * RPW;  // queries per block
  extern __shared__ float smem[];
  const int D = dims.head_dim, seq = dims.seq;
  float* qs = smem;                                       // [kRows][D], pre-scaled
  float* ks = qs + kRows * D;                             // [32][D + 1]: lanes read rows, so pad
  float* vs = ks + kStreamTile * (D + 1);                 // [32][D]: lanes read columns
  const int tile = int(gridDim.x) - 1 - int(blockIdx.x);  // longest (latest) query tiles first
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (dims.heads / dims.kv_heads);
  const int q0 = tile * kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t q_stride = int64_t(dims.heads) * D, kv_stride = int64_t(dims.kv_heads) * D;

  load_tile(qs, D, q + ((int64_t(b) * seq + q0) * dims.heads + h) * D, q_stride, kRows,
            min(kRows, seq - q0), D, dims.scale);
  const T* k_head = k + (int64_t(b) * seq * dims.kv_heads + hk) * D;
  const T* v_head = v + (int64_t(b) * seq * dims.kv_heads + hk) * D;

  float m[RPW], l[RPW], acc[RPW][DPL];
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[r][i] = 0.0f;
  }
  const int last_query = min(q0 + kRows, seq) - 1;
  const int key_tiles = last_query / kStreamTile + 1;
  for (int kt = 0; kt < key_tiles; ++kt) {
    const int k0 = kt * kStreamTile;
    const int valid = min(kStreamTile, seq - k0);
    __syncthreads();  // the previous tile is consumed (and, the first time, qs is complete)
    load_tile(ks, D + 1, k_head + k0 * kv_stride, kv_stride, kStreamTile, valid, D, 1.0f);
    load_tile(vs, D, v_head + k0 * kv_stride, kv_stride, kStreamTile, valid, D, 1.0f);
    __syncthreads();

    float s[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) s[r] = 0.0f;
    const float* k_row = ks + lane * (D + 1);
    for (int d = 0; d < D; ++d) {
      const float kd = k_row[d];
#pragma unroll
      for (int r = 0; r < RPW; ++r) s[r] += qs[(warp * RPW + r) * D + d] * kd;
    }
    const int key = k0 + lane;
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int query = q0 + warp * RPW + r;
      if (key > query || key >= seq) s[r] = -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(s[r]));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no (-inf) - (-inf)
      const float alpha = expf(m[r] - m_use);
      const float p = expf(s[r] - m_use);
      l[r] = l[r] * alpha + p;
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[r][i] *= alpha;
      m[r] = m_new;
      s[r] = p;
    }
    for (int j = 0; j < kStreamTile; ++j) {
      float vj[DPL];
#pragma unroll
      for (int i = 0; i < DPL; ++i) {
        const int d = lane + 32 * i;
        vj[i] = d < D ? vs[j * D + d] : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        const float pj = __shfl_sync(0xffffffffu, s[r], j);
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[r][i] += pj * vj[i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const float total = warp_sum(l[r]);
    const int query = q0 + warp * RPW + r;
    if (query >= seq) continue;
    const float inv = 1.0f / total;
    T* out_row = out + ((int64_t(b) * seq + query) * dims.heads + h) * D;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) store(out_row + d, acc[r][i] * inv);
    }
    if (lane == 0) lse[(int64_t(b) * dims.heads + h) * seq + query] = m[r] + logf(total);
  }
}

}  // namespace

// q: (B, T, H, D), k, v: (B, T, Hkv, D) -> out: (B, T, H, D), lse: (B, H, T) f32.
void attention_fwd(const AttentionFwdArgs& args, Stream& stream) {
  const char* op = "attention_fwd";
  const AttentionDims dims = attention_dims(args.q, args.k, args.v, args.scale, op);
  require_same_shape(args.out, args.q, op, "out", "q");
  H2_CUDA_REQUIRE(args.out.dtype() == args.q.dtype(), "cuda attention_fwd: out dtype != q dtype");
  H2_CUDA_REQUIRE(args.lse.numel() == int64_t(dims.batch) * dims.heads * dims.seq,
                  str_cat("cuda attention_fwd: lse ", args.lse.shape().str(), " is not (B, H, T)"));
  float* lse = f32_ptr(args.lse, op, "lse");
  if (args.q.numel() == 0) return;
  Launch launch(stream);
  visit_float(args.q.dtype(), op, [&](auto type) {
    using T = typename decltype(type)::type;
    visit_head_dim(dims.head_dim, op, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      constexpr int kRows = kAttnWarps * kRowsPerWarp<DPL>;
      const int D = dims.head_dim;
      const size_t smem =
          sizeof(float) * size_t(kRows * D + kStreamTile * (D + 1) + kStreamTile * D);
      auto kernel = attention_fwd_kernel<T, DPL>;
      allow_shared_memory(kernel, smem);
      const dim3 grid(unsigned((dims.seq + kRows - 1) / kRows), unsigned(dims.heads),
                      unsigned(dims.batch));
      kernel<<<grid, kAttnThreads, smem, launch.stream()>>>(
          static_cast<T*>(args.out.data()), lse, static_cast<const T*>(args.q.data()),
          static_cast<const T*>(args.k.data()), static_cast<const T*>(args.v.data()), dims);
      H2_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace h2::cuda
