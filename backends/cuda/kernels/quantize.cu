// CUDA quantize: FP8/FP4 codes, block scales (and the nvfp4 global) of a matrix per q.spec
// (core/lowp/quant_spec.h). The element and scale arithmetic is the CPU kernel's, from the same
// headers (core/lowp/format_codec.h, core/lowp/block_scale.h), so both write the same bytes.
//
// Shapes: the quantized matrix is (R, K); `in` is (R, K), or (K, R) with transpose. br x bc:
// block extents; GR x GC: scale grid; a segment is one row's part of one block (<= bc elements).
//
// Kernels (correctness first, each a grid-stride loop):
//   1. row_amax      max |x| of every segment (R x GC): a warp per segment for row-major input,
//                    a thread per segment (threads along r, so reads coalesce) when transposed;
//   2. block_amax    one thread per block: max over its rows' segments (GR x GC);
//   3. tensor_amax   one thread block: max over blocks -> stats[0], nvfp4 s_enc and global;
//   4. block_scales  one thread per block: BlockScale per rule -> scales, multipliers;
//   5. encode        one thread per code byte (two E2M1 elements): x * multiplier, rounded
//                    (stochastically with counter_random(seed, first_index + r * K + k));
//                    saturated count by warp sums and one atomicAdd per warp -> stats[1].
#include <cfloat>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"
#include "core/lowp/block_scale.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/quant_check.h"

namespace h2::cuda {
namespace {

using lowp::Format;
using lowp::ScaleRule;

struct Geometry {
  int64_t R, K, br, bc, GR, GC;
  bool transpose;
};

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

__device__ __forceinline__ float element(const FloatPtr& in, const Geometry& g, int64_t r,
                                         int64_t k) {
  return in.get(g.transpose ? k * g.R + r : r * g.K + k);
}

// |x| ignoring NaN (fmaxf drops a NaN operand).
__device__ __forceinline__ float abs_or_zero(float x) {
  return fmaxf(fabsf(x), 0.0f);
}

__global__ void row_amax_kernel(float* row_amax, FloatPtr in, Geometry g) {
  const int64_t segments = g.R * g.GC;
  if (g.transpose) {  // thread per segment, consecutive threads on consecutive rows
    for (int64_t s = first_index(); s < segments; s += grid_stride()) {
      const int64_t c = s / g.R, r = s % g.R;
      const int64_t k1 = min64(g.K, (c + 1) * g.bc);
      float m = 0;
      for (int64_t k = c * g.bc; k < k1; ++k) m = fmaxf(m, abs_or_zero(element(in, g, r, k)));
      row_amax[r * g.GC + c] = m;
    }
    return;
  }
  const int lane = threadIdx.x & 31;
  const int64_t warp = first_index() >> 5, warps = grid_stride() >> 5;
  for (int64_t s = warp; s < segments; s += warps) {  // warp-uniform loop
    const int64_t r = s / g.GC, c = s % g.GC;
    const int64_t k1 = min64(g.K, (c + 1) * g.bc);
    float m = 0;
    for (int64_t k = c * g.bc + lane; k < k1; k += 32)
      m = fmaxf(m, abs_or_zero(element(in, g, r, k)));
    m = warp_max(m);
    if (lane == 0) row_amax[s] = m;
  }
}

__global__ void block_amax_kernel(float* block_amax, const float* row_amax, Geometry g) {
  for (int64_t b = first_index(); b < g.GR * g.GC; b += grid_stride()) {
    const int64_t rb = b / g.GC, c = b % g.GC;
    const int64_t r1 = min64(g.R, (rb + 1) * g.br);
    float m = 0;
    for (int64_t r = rb * g.br; r < r1; ++r) m = fmaxf(m, row_amax[r * g.GC + c]);
    block_amax[b] = m;
  }
}

// One block: tensor amax into *amax (and stats[0]); nvfp4's s_enc into *s_enc and g into *global.
__global__ void tensor_amax_kernel(float* amax, float* s_enc, float* global, float* stats,
                                   const float* block_amax, int64_t blocks) {
  __shared__ float shared[32];
  float m = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) m = fmaxf(m, block_amax[b]);
  m = warp_max(m);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < int(blockDim.x >> 5) ? shared[lane] : 0.0f;
    m = warp_max(m);
    if (lane == 0) {
      *amax = m;
      const float s = lowp::nvfp4_encode_scale(m);
      *s_enc = s;
      if (global != nullptr) *global = 1.0f / s;
      if (stats != nullptr) stats[0] = m;
    }
  }
}

struct ScaleParams {
  ScaleRule rule;
  float max_finite;
  float imposed;  // > 0: the multiplier of the one block
};

__global__ void block_scales_kernel(float* multiplier, void* scales, const float* block_amax,
                                    const float* s_enc_ptr, ScaleParams p, int64_t blocks) {
  const float s_enc = *s_enc_ptr;
  const float global = 1.0f / s_enc;
  for (int64_t b = first_index(); b < blocks; b += grid_stride()) {
    lowp::BlockScale s;
    const float amax = block_amax[b];
    if (p.imposed > 0) {
      s = lowp::imposed_scale(p.imposed);
    } else if (p.rule == ScaleRule::f32_amax) {
      s = lowp::f32_amax_scale(amax, p.max_finite);
    } else if (p.rule == ScaleRule::nvfp4) {
      s = lowp::nvfp4_scale(amax, s_enc, global);
    } else {
      s = lowp::e8m0_scale(amax, p.rule == ScaleRule::e8m0_ceil, p.max_finite);
    }
    multiplier[b] = s.multiplier;
    if (p.rule == ScaleRule::f32_amax) {
      static_cast<float*>(scales)[b] = s.scale;
    } else {
      static_cast<uint8_t*>(scales)[b] = s.code;
    }
  }
}

struct EncodeParams {
  bool saturate, stochastic;
  uint64_t key;  // codec::random_key(seed)
  uint64_t first_index;
};

template <class F>
__device__ __forceinline__ uint32_t encode_one(float scaled, uint64_t index, const EncodeParams& p,
                                               unsigned long long& saturated) {
  const uint32_t bits = lowp::codec::float_bits(scaled);
  const uint32_t abs_bits = bits & lowp::codec::kF32AbsMask;
  // The codec's count (formats.h EncodeStats): round to nearest even would carry past max_finite.
  saturated += (abs_bits >= F::kOverflowBits && abs_bits <= lowp::codec::kF32InfBits) ? 1u : 0u;
  if (p.stochastic)
    return lowp::codec::encode_stochastic<F>(
        bits, lowp::codec::counter_random_from_key(p.key, p.first_index + index), p.saturate);
  return lowp::codec::encode_rne<F>(bits, p.saturate);
}

// One thread per code byte; `per_byte` elements (1, or 2 for E2M1) along k.
template <class F>
__global__ void encode_kernel(uint8_t* codes, unsigned long long* saturated_total, FloatPtr in,
                              const float* multiplier, Geometry g, EncodeParams p) {
  constexpr int kPerByte = F::kBits == 4 ? 2 : 1;
  const int64_t kb_count = g.K / kPerByte;
  const int64_t bytes = g.R * kb_count;
  unsigned long long saturated = 0;
  for (int64_t t = first_index(); t < bytes; t += grid_stride()) {
    // Transposed input: consecutive threads on consecutive r, so that reads coalesce.
    const int64_t r = g.transpose ? t % g.R : t / kb_count;
    const int64_t kb = g.transpose ? t / g.R : t % kb_count;
    const float* m_row = multiplier + (r / g.br) * g.GC;
    uint32_t byte = 0;
    for (int e = 0; e < kPerByte; ++e) {
      const int64_t k = kb * kPerByte + e;
      const float scaled = element(in, g, r, k) * m_row[k / g.bc];
      byte |= encode_one<F>(scaled, uint64_t(r * g.K + k), p, saturated) << (4 * e);
    }
    codes[r * kb_count + kb] = uint8_t(byte);
  }
  saturated = warp_sum(saturated);
  if ((threadIdx.x & 31) == 0 && saturated != 0) atomicAdd(saturated_total, saturated);
}

__global__ void saturated_to_stats_kernel(float* stats, const unsigned long long* saturated) {
  stats[1] = float(*saturated);
}

}  // namespace

// q.codes (R, K), q.scales (GR, GC), q.global (1, nvfp4) <- in (R, K), or (K, R) transposed;
// stats (2) optional: [amax of in, saturated count].
void quantize(const QuantizeArgs& args, Stream& stream) {
  const char* op = "quantize";
  const lowp::QTensor& q = args.q;
  lowp::check_qtensor(q, op, "q");
  FloatPtr in = float_ptr(args.in, op, "in");
  const int64_t R = q.rows(), K = q.cols();
  H2_CUDA_REQUIRE(args.in.rank() == 2 && args.in.size(0) == (args.transpose ? K : R) &&
                      args.in.size(1) == (args.transpose ? R : K),
                  str_cat("cuda quantize: in ", args.in.shape().str(), " does not give codes ",
                          q.codes.shape().str(), args.transpose ? " when transposed" : ""));
  float* stats = nullptr;
  if (args.stats.defined()) {
    H2_CUDA_REQUIRE(args.stats.numel() == 2,
                    str_cat("cuda quantize: stats ", args.stats.shape().str(), " is not 2 f32"));
    stats = f32_ptr(args.stats, op, "stats");
  }
  const bool imposed = args.multiplier > 0;
  if (imposed)
    H2_CUDA_REQUIRE(
        q.spec.rule == ScaleRule::f32_amax && lowp::is_per_tensor(q.spec, R, K) &&
            args.multiplier <= FLT_MAX,
        str_cat("cuda quantize: an imposed multiplier needs a per-tensor f32_amax spec, "
                "not ",
                lowp::describe(q.spec)));
  const Geometry g{R,
                   K,
                   lowp::block_extent(q.spec.block_rows, R),
                   lowp::block_extent(q.spec.block_cols, K),
                   q.scales.size(0),
                   q.scales.size(1),
                   args.transpose};
  float* global = q.spec.rule == ScaleRule::nvfp4 ? f32_ptr(q.global, op, "global") : nullptr;
  Launch launch(stream);
  cudaStream_t s = launch.stream();
  Scratch<float> row_amax(stream, size_t(std::max<int64_t>(R * g.GC, 1)));
  Scratch<float> block_amax(stream, size_t(std::max<int64_t>(g.GR * g.GC, 1)));
  Scratch<float> multiplier(stream, size_t(std::max<int64_t>(g.GR * g.GC, 1)));
  Scratch<float> scalars(stream, 2);  // tensor amax, s_enc
  Scratch<unsigned long long> saturated(stream, 1);
  H2_CUDA_CHECK(cudaMemsetAsync(row_amax.data(), 0, sizeof(float), s));
  H2_CUDA_CHECK(cudaMemsetAsync(block_amax.data(), 0, sizeof(float), s));
  H2_CUDA_CHECK(cudaMemsetAsync(saturated.data(), 0, sizeof(unsigned long long), s));
  const int64_t blocks = g.GR * g.GC;
  if (R > 0 && K > 0) {
    row_amax_kernel<<<grid_for(g.transpose ? R * g.GC : R * g.GC * 32), kThreads, 0, s>>>(
        row_amax.data(), in, g);
    H2_CUDA_LAUNCH_CHECK();
    block_amax_kernel<<<grid_for(blocks), kThreads, 0, s>>>(block_amax.data(), row_amax.data(), g);
    H2_CUDA_LAUNCH_CHECK();
  }
  tensor_amax_kernel<<<1, 1024, 0, s>>>(scalars.data(), scalars.data() + 1, global, stats,
                                        block_amax.data(), blocks);
  H2_CUDA_LAUNCH_CHECK();
  if (blocks > 0) {
    const ScaleParams params{q.spec.rule, lowp::format_info(q.spec.element).max_finite,
                             imposed ? args.multiplier : 0.0f};
    block_scales_kernel<<<grid_for(blocks), kThreads, 0, s>>>(
        multiplier.data(), q.scales.data(), block_amax.data(), scalars.data() + 1, params, blocks);
    H2_CUDA_LAUNCH_CHECK();
  }
  if (R > 0 && K > 0) {
    const EncodeParams params{args.overflow == lowp::Overflow::saturate, args.stochastic,
                              lowp::codec::random_key(args.seed), args.first_index};
    uint8_t* codes = static_cast<uint8_t*>(q.codes.data());
    const int64_t bytes = q.spec.element == Format::e2m1 ? R * K / 2 : R * K;
    const unsigned grid = grid_for(bytes);
    switch (q.spec.element) {
      case Format::e4m3:
        encode_kernel<lowp::codec::E4M3>
            <<<grid, kThreads, 0, s>>>(codes, saturated.data(), in, multiplier.data(), g, params);
        break;
      case Format::e5m2:
        encode_kernel<lowp::codec::E5M2>
            <<<grid, kThreads, 0, s>>>(codes, saturated.data(), in, multiplier.data(), g, params);
        break;
      default:
        encode_kernel<lowp::codec::E2M1>
            <<<grid, kThreads, 0, s>>>(codes, saturated.data(), in, multiplier.data(), g, params);
        break;
    }
    H2_CUDA_LAUNCH_CHECK();
  }
  if (stats != nullptr) {
    saturated_to_stats_kernel<<<1, 1, 0, s>>>(stats, saturated.data());
    H2_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace h2::cuda
