// qmatmul's GEMM with per-K-block promotion (kblock_gemm.h: fp8_blockwise; and MX, NVFP4 as one
// block) for CPUs without bf16 GEMMs or AVX-512: the FP32 driver (kblock_fp32.h) with tiles of 6
// x 16 in AVX2 registers (kblock_fp32_tiles.h: twelve accumulators, two of b's vectors and a
// broadcast of a).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/kernels/bf16_narrow.h"
#include "backends/cpu/kernels/kblock_fp32.h"
#include "core/cpu_features.h"
#include "core/error.h"

// Everything from here to the pop is compiled for AVX2 and FMA: this file's lanes and the tiles'
// body instantiated with them.
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include "backends/cpu/kernels/kblock_fp32_tiles.h"

namespace h2::cpu {
namespace {

constexpr int kMR = 6;  // rows of an out tile

struct Avx2Lanes {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_bf16(const bf16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_bf16(V lo, V hi, bf16_t* p) { store_bf16x16_avx2(lo, hi, p); }
};

constexpr std::array<kblock_fp32::TileFn, kMR> kTiles = kblock_fp32::tiles<Avx2Lanes, kMR>();

}  // namespace
}  // namespace h2::cpu
#pragma GCC pop_options

namespace h2::cpu {

bool kblock_gemm_avx2_runs_here() {
  return cpu_has(CpuFeature::avx2) && cpu_has(CpuFeature::fma);
}

void kblock_gemm_avx2(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                      KBlockValues values, Stream& stream) {
  H2_CHECK(kblock_gemm_avx2_runs_here(),
           "qmatmul's AVX2 K-block GEMM needs AVX2 and FMA, which this CPU lacks or "
           "H2_CPU_MAX_ISA={} hides",
           cpu_isa_level_name(cpu_isa_cap()));
  kblock_fp32::kblock_gemm_fp32(args, a, b, values,
                                {.mr = kMR, .nr = 2 * Avx2Lanes::kWidth, .tiles = kTiles}, stream);
}

}  // namespace h2::cpu
