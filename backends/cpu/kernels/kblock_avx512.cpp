// qmatmul's GEMM with per-K-block promotion (kblock_gemm.h: fp8_blockwise; and MX, NVFP4 as one
// block) for AVX-512 CPUs without bf16 instructions (Skylake to Ice Lake): the FP32 driver
// (kblock_fp32.h) with tiles of 12 x 32 in AVX-512 registers (kblock_fp32_tiles.h: 24
// accumulators, two of b's vectors, a's values broadcast from memory by the FMAs). It replaced
// FP32 tiles into oneDNN's AVX-512 SGEMM (qmatmul.cpp's FP32 route), which the AVX2 tiles did not
// beat on these CPUs: one block's fp8_blockwise linears 1.13x their bf16 time against 1.24x,
// h2_bench_lowp_linear on the AVX-512 path (docs/performance.md).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/kernels/bf16_narrow.h"
#include "backends/cpu/kernels/kblock_fp32.h"
#include "core/cpu_features.h"
#include "core/error.h"

// Everything from here to the pop is compiled for AVX512F and AVX512BW: this file's lanes and the
// tiles' body instantiated with them.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
#include "backends/cpu/kernels/kblock_fp32_tiles.h"

namespace h2::cpu {
namespace {

constexpr int kMR = 12;  // rows of an out tile

// A bf16 out is widened by the zero-masked forms, all lanes on: the unmasked ones start from an
// undefined vector and draw GCC 12's false "may be used uninitialized" warnings.
struct Avx512Lanes {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_bf16(const bf16_t* p) {
    constexpr __mmask16 kAll = 0xffff;
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, bits), 16));
  }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_bf16(V lo, V hi, bf16_t* p) { store_bf16x32_avx512(lo, hi, p); }
};

constexpr std::array<kblock_fp32::TileFn, kMR> kTiles = kblock_fp32::tiles<Avx512Lanes, kMR>();

}  // namespace
}  // namespace h2::cpu
#pragma GCC pop_options

namespace h2::cpu {

bool kblock_gemm_avx512_runs_here() {
  return cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw);
}

void kblock_gemm_avx512(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                        KBlockValues values, Stream& stream) {
  H2_CHECK(kblock_gemm_avx512_runs_here(),
           "qmatmul's AVX-512 K-block GEMM needs AVX512F and AVX512BW, which this CPU lacks or "
           "H2_CPU_MAX_ISA={} hides",
           cpu_isa_level_name(cpu_isa_cap()));
  kblock_fp32::kblock_gemm_fp32(
      args, a, b, values, {.mr = kMR, .nr = 2 * Avx512Lanes::kWidth, .tiles = kTiles}, stream);
}

}  // namespace h2::cpu
