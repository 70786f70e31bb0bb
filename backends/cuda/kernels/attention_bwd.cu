// Causal attention backward, FlashAttention-2 style, deterministic and without atomics.
// Shapes: q, out, dout, dq (B, T, H, D); k, v, dk, dv (B, T, Hkv, D); lse (B, H, T) f32.
// With s = scale * q.k, p = exp(s - lse), delta_i = dout_i . out_i (one (B, H, T) f32 scratch):
//   dp_ij = dout_i . v_j    ds_ij = p_ij * (dp_ij - delta_i)
//   dq_i = scale * sum_j ds_ij k_j    dk_j = scale * sum_i ds_ij q_i    dv_j = sum_i p_ij dout_i
// Two kernels recompute p: dq per (query tile, h, b), streaming key tiles (like the forward);
// dk/dv per (key tile, kv head, b), streaming every query tile of every head in the kv head's
// group, so the group sum happens in registers in a fixed order. Extra memory: O(B*H*T).
#include "backends/cuda/kernels/attention_common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

// delta[(b, h, t)] = dout[b, t, h, :] . out[b, t, h, :]; one warp per (b, t, h).
template <class T>
__global__ void attention_delta_kernel(float* delta, const T* dout, const T* out,
                                       AttentionDims dims, int64_t rows) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together
  float acc = 0.0f;
  for (int d = lane; d < dims.head_dim; d += 32)
    acc += load(dout + row * dims.head_dim + d) * load(out + row * dims.head_dim + d);
  acc = warp_sum(acc);
  if (lane != 0) return;
  const int64_t h = row % dims.heads, bt = row / dims.heads;
  const int64_t t = bt % dims.seq, b = bt / dims.seq;
  delta[(b * dims.heads + h) * dims.seq + t] = acc;
}

template <class T, int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v, const float* lse,
                        const float* delta, AttentionDims dims) {
  constexpr int RPW = kRowsPerWarp<DPL>;
  constexpr int kRows = kAttnWarps * RPW;  // queries per block
  extern __shared__ float smem[];
  const int D = dims.head_dim, seq = dims.seq, pitch = D + 1;
  float* qs = smem;                      // [kRows][D]
  float* dos = qs + kRows * D;           // [kRows][D]
  float* ks = dos + kRows * D;           // [32][D + 1]
  float* vs = ks + kStreamTile * pitch;  // [32][D + 1]
  const int tile = int(gridDim.x) - 1 - int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (dims.heads / dims.kv_heads);
  const int q0 = tile * kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t q_stride = int64_t(dims.heads) * D, kv_stride = int64_t(dims.kv_heads) * D;
  const int64_t q_offset = ((int64_t(b) * seq + q0) * dims.heads + h) * D;
  const int q_valid = min(kRows, seq - q0);
  load_tile(qs, D, q + q_offset, q_stride, kRows, q_valid, D, 1.0f);
  load_tile(dos, D, dout + q_offset, q_stride, kRows, q_valid, D, 1.0f);
  const T* k_head = k + (int64_t(b) * seq * dims.kv_heads + hk) * D;
  const T* v_head = v + (int64_t(b) * seq * dims.kv_heads + hk) * D;
  const int64_t stat_base = (int64_t(b) * dims.heads + h) * seq;

  float row_lse[RPW], row_delta[RPW], acc[RPW][DPL];
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const int query = q0 + warp * RPW + r;
    row_lse[r] = query < seq ? lse[stat_base + query] : 0.0f;
    row_delta[r] = query < seq ? delta[stat_base + query] : 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[r][i] = 0.0f;
  }
  const int key_tiles = (min(q0 + kRows, seq) - 1) / kStreamTile + 1;
  for (int kt = 0; kt < key_tiles; ++kt) {
    const int k0 = kt * kStreamTile;
    const int valid = min(kStreamTile, seq - k0);
    __syncthreads();
    load_tile(ks, pitch, k_head + k0 * kv_stride, kv_stride, kStreamTile, valid, D, 1.0f);
    load_tile(vs, pitch, v_head + k0 * kv_stride, kv_stride, kStreamTile, valid, D, 1.0f);
    __syncthreads();

    float s[RPW], ds[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) s[r] = ds[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = ks[lane * pitch + d], vd = vs[lane * pitch + d];
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        s[r] += qs[(warp * RPW + r) * D + d] * kd;
        ds[r] += dos[(warp * RPW + r) * D + d] * vd;  // dp for now
      }
    }
    const int key = k0 + lane;
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int query = q0 + warp * RPW + r;
      const float p = key <= query && query < seq ? expf(dims.scale * s[r] - row_lse[r]) : 0.0f;
      ds[r] = p * (ds[r] - row_delta[r]);
    }
    for (int j = 0; j < kStreamTile; ++j) {
      float kj[DPL];
#pragma unroll
      for (int i = 0; i < DPL; ++i) {
        const int d = lane + 32 * i;
        kj[i] = d < D ? ks[j * pitch + d] : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[r][i] += dsj * kj[i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const int query = q0 + warp * RPW + r;
    if (query >= seq) continue;
    T* dq_row = dq + ((int64_t(b) * seq + query) * dims.heads + h) * D;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) store(dq_row + d, acc[r][i] * dims.scale);
    }
  }
}

template <class T, int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dkdv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                          const float* lse, const float* delta, AttentionDims dims) {
  constexpr int RPW = kRowsPerWarp<DPL>;
  constexpr int kRows = kAttnWarps * RPW;  // keys per block
  extern __shared__ float smem[];
  const int D = dims.head_dim, seq = dims.seq, pitch = D + 1;
  float* ks = smem;                       // [kRows][D]
  float* vs = ks + kRows * D;             // [kRows][D]
  float* qs = vs + kRows * D;             // [32][D + 1]
  float* dos = qs + kStreamTile * pitch;  // [32][D + 1]
  float* lse_s = dos + kStreamTile * pitch;
  float* delta_s = lse_s + kStreamTile;
  const int hk = blockIdx.y, b = blockIdx.z;
  const int k0 = blockIdx.x * kRows;  // early keys see the most queries: they launch first
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = dims.heads / dims.kv_heads;
  const int64_t q_stride = int64_t(dims.heads) * D, kv_stride = int64_t(dims.kv_heads) * D;
  const int64_t kv_offset = ((int64_t(b) * seq + k0) * dims.kv_heads + hk) * D;
  const int k_valid = min(kRows, seq - k0);
  load_tile(ks, D, k + kv_offset, kv_stride, kRows, k_valid, D, 1.0f);
  load_tile(vs, D, v + kv_offset, kv_stride, kRows, k_valid, D, 1.0f);

  float dk_acc[RPW][DPL], dv_acc[RPW][DPL];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int i = 0; i < DPL; ++i) dk_acc[r][i] = dv_acc[r][i] = 0.0f;
  const int query_tiles = (seq + kStreamTile - 1) / kStreamTile;
  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    const int64_t stat_base = (int64_t(b) * dims.heads + h) * seq;
    for (int qt = k0 / kStreamTile; qt < query_tiles; ++qt) {
      const int i0 = qt * kStreamTile;
      const int valid = min(kStreamTile, seq - i0);
      const int64_t q_offset = ((int64_t(b) * seq + i0) * dims.heads + h) * D;
      __syncthreads();
      load_tile(qs, pitch, q + q_offset, q_stride, kStreamTile, valid, D, 1.0f);
      load_tile(dos, pitch, dout + q_offset, q_stride, kStreamTile, valid, D, 1.0f);
      if (threadIdx.x < kStreamTile) {
        const bool in = int(threadIdx.x) < valid;
        lse_s[threadIdx.x] = in ? lse[stat_base + i0 + threadIdx.x] : 0.0f;
        delta_s[threadIdx.x] = in ? delta[stat_base + i0 + threadIdx.x] : 0.0f;
      }
      __syncthreads();

      float p[RPW], ds[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r) p[r] = ds[r] = 0.0f;
      for (int d = 0; d < D; ++d) {
        const float qd = qs[lane * pitch + d], dod = dos[lane * pitch + d];
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          p[r] += qd * ks[(warp * RPW + r) * D + d];    // q.k for now
          ds[r] += dod * vs[(warp * RPW + r) * D + d];  // dp for now
        }
      }
      const int query = i0 + lane;
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        const int key = k0 + warp * RPW + r;
        p[r] = key <= query && query < seq ? expf(dims.scale * p[r] - lse_s[lane]) : 0.0f;
        ds[r] = p[r] * (ds[r] - delta_s[lane]);
      }
      for (int j = 0; j < kStreamTile; ++j) {
        float qj[DPL], doj[DPL];
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
          const int d = lane + 32 * i;
          qj[i] = d < D ? qs[j * pitch + d] : 0.0f;
          doj[i] = d < D ? dos[j * pitch + d] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          const float pj = __shfl_sync(0xffffffffu, p[r], j);
          const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
          for (int i = 0; i < DPL; ++i) {
            dv_acc[r][i] += pj * doj[i];
            dk_acc[r][i] += dsj * qj[i];
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const int key = k0 + warp * RPW + r;
    if (key >= seq) continue;
    const int64_t at = ((int64_t(b) * seq + key) * dims.kv_heads + hk) * D;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < D) {
        store(dk + at + d, dk_acc[r][i] * dims.scale);
        store(dv + at + d, dv_acc[r][i]);
      }
    }
  }
}

}  // namespace

// dout, q, out: (B, T, H, D); k, v: (B, T, Hkv, D); lse: (B, H, T) -> dq, dk, dv.
void attention_bwd(const AttentionBwdArgs& args, Stream& stream) {
  const char* op = "attention_bwd";
  const AttentionDims dims = attention_dims(args.q, args.k, args.v, args.scale, op);
  require_same_shape(args.dq, args.q, op, "dq", "q");
  require_same_shape(args.dout, args.q, op, "dout", "q");
  require_same_shape(args.out, args.q, op, "out", "q");
  require_same_shape(args.dk, args.k, op, "dk", "k");
  require_same_shape(args.dv, args.v, op, "dv", "v");
  for (const Tensor* t : {&args.dq, &args.dk, &args.dv, &args.dout, &args.out})
    H2_CUDA_REQUIRE(t->dtype() == args.q.dtype(), "cuda attention_bwd: dtypes differ from q's");
  const int64_t stats = int64_t(dims.batch) * dims.heads * dims.seq;
  H2_CUDA_REQUIRE(args.lse.numel() == stats,
                  str_cat("cuda attention_bwd: lse ", args.lse.shape().str(), " is not (B, H, T)"));
  const float* lse = f32_ptr(args.lse, op, "lse");
  if (args.q.numel() == 0) return;
  Launch launch(stream);
  Scratch<float> delta(stream, size_t(stats));
  visit_float(args.q.dtype(), op, [&](auto type) {
    using T = typename decltype(type)::type;
    const T* dout = static_cast<const T*>(args.dout.data());
    const T* q = static_cast<const T*>(args.q.data());
    const T* k = static_cast<const T*>(args.k.data());
    const T* v = static_cast<const T*>(args.v.data());
    attention_delta_kernel<T><<<unsigned((stats + 7) / 8), 256, 0, launch.stream()>>>(
        delta.data(), dout, static_cast<const T*>(args.out.data()), dims, stats);
    H2_CUDA_LAUNCH_CHECK();
    visit_head_dim(dims.head_dim, op, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      constexpr int kRows = kAttnWarps * kRowsPerWarp<DPL>;
      const int D = dims.head_dim;
      const unsigned row_tiles = unsigned((dims.seq + kRows - 1) / kRows);
      const size_t tile_floats = size_t(2 * kRows * D + 2 * kStreamTile * (D + 1));

      auto dq_kernel = attention_dq_kernel<T, DPL>;
      allow_shared_memory(dq_kernel, sizeof(float) * tile_floats);
      dq_kernel<<<dim3(row_tiles, dims.heads, dims.batch), kAttnThreads,
                  sizeof(float) * tile_floats, launch.stream()>>>(
          static_cast<T*>(args.dq.data()), dout, q, k, v, lse, delta.data(), dims);
      H2_CUDA_LAUNCH_CHECK();

      const size_t dkdv_smem = sizeof(float) * (tile_floats + 2 * kStreamTile);
      auto dkdv_kernel = attention_dkdv_kernel<T, DPL>;
      allow_shared_memory(dkdv_kernel, dkdv_smem);
      dkdv_kernel<<<dim3(row_tiles, dims.kv_heads, dims.batch), kAttnThreads, dkdv_smem,
                    launch.stream()>>>(static_cast<T*>(args.dk.data()),
                                       static_cast<T*>(args.dv.data()), dout, q, k, v, lse,
                                       delta.data(), dims);
      H2_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace h2::cuda
