// qmatmul's GEMM with per-K-block promotion (kblock_gemm.h: fp8_blockwise; and MX, NVFP4 as one
// block) for CPUs without bf16 GEMMs: FP32 FMAs on AVX2.
//
// Shapes: M rows of a and out; N rows of b (columns of out); K the reduction extent, in J blocks
// of kb columns (the last one possibly narrower). Tiles of out are kMR x kNR (6 x 16: twelve
// accumulator registers, two of b's vectors and a broadcast of a); P = ceil(N / kNR) panels of
// b. RB: rows of a decoded at a time (a multiple of kMR; their FP32 values about kRowBlockBytes).
//
// Algorithm. Every code value is exact in FP32 and so is the product of two, so each K block's
// products are summed by FMAs in FP32, in K order, as the AVX512_BF16 kernel sums them, and
// promoted to the tile's FP32 accumulator, c += (alpha s_a(i) s_b(n)) * T(i, n), block after
// block, the first block starting from beta * out (from 0 where beta is 0), the last one's sums
// going to out (f32, or bf16 rounded to nearest even). b's codes are decoded once into panels of
// FP32 code values, K x kNR each (zeros past N; see pack_b); each thread takes an equal run of
// a's rows, decodes RB of them at a time (row stride K) and runs their tiles panel by panel, so
// that a panel stays in L1 or L2 for RB / kMR tiles, each tile prefetching the panel's rows
// kPrefetchSteps ahead (one block's linears went from 1.21x to 1.15x their bf16 time with it:
// h2_bench_lowp_linear on the AVX2 path).
// A block's tiles have 6 or 5 rows where they can (rows_of_tile). Operands whose scales fold into
// exact values (KBlockValues::local: MX, NVFP4) go as their local values in one block over K, the
// products and sums of qmatmul's exact bf16 GEMM. This replaces qmatmul.cpp's FP32 route for these
// operands (FP32 tiles of scaled values into a library SGEMM, which packs both again), whose sums
// are over the whole of K at once.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#include "backends/cpu/kernels/bf16_narrow.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kblock_gemm.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/kernels/transpose.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half_float.h"

namespace h2::cpu {
namespace {

#define H2_AVX2_FMA [[gnu::target("avx2,fma")]]

constexpr int kMR = 6;                         // rows of an out tile
constexpr int64_t kNR = 16;                    // columns of an out tile: two 8-float vectors
constexpr int64_t kRowBlockBytes = 192 << 10;  // a's decoded rows per block, about
constexpr int64_t kMaxRowBlock = 20 * kMR;     // rows per block at most
constexpr int64_t kPrefetchSteps = 16;         // panel rows (64 bytes each) a tile prefetches ahead

struct Geometry {
  int64_t M, N, K, kb, J, P;
};

// Where a tile's sums go: out's f32 or bf16 row-major storage at the tile's first row and column
// (all kNR columns out's; an edge tile goes through an f32 buffer), ld apart; beta * out is where
// the first block's sums start (out not read where beta is 0).
struct TileOut {
  float* f32;
  bf16_t* bf16;
  int64_t ld;
  float beta;
};

// beta times 8 values of out's row r from column `half` * 8 on, as FP32.
H2_AVX2_FMA inline __m256 scaled_out(const TileOut& out, int r, int half) {
  const int64_t at = r * out.ld + half * 8;
  const __m256 x = out.f32 != nullptr ? _mm256_loadu_ps(out.f32 + at)
                                      : _mm256_castsi256_ps(_mm256_slli_epi32(
                                            _mm256_cvtepu16_epi32(_mm_loadu_si128(
                                                reinterpret_cast<const __m128i*>(out.bf16 + at))),
                                            16));
  return _mm256_mul_ps(_mm256_set1_ps(out.beta), x);
}

// Row r's promotion of block j: c + (s_a s_b) T, the first block's c being beta * out or 0 (the
// same FMA with a zero addend, so that a zero keeps its sign); after the last block to out.
H2_AVX2_FMA inline void promote_row(const Geometry& g, int64_t j, int r, __m256 t0, __m256 t1,
                                    const float* sa, const float* sb, float* c,
                                    const TileOut& out) {
  __m256 c0, c1;
  if (j > 0) {
    c0 = _mm256_loadu_ps(c + r * kNR);
    c1 = _mm256_loadu_ps(c + r * kNR + 8);
  } else if (out.beta != 0) {
    c0 = scaled_out(out, r, 0);
    c1 = scaled_out(out, r, 1);
  } else {
    c0 = c1 = _mm256_setzero_ps();
  }
  const __m256 s = _mm256_set1_ps(sa[r * g.J + j]);
  const float* sbj = sb + j * g.P * kNR;
  c0 = _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_loadu_ps(sbj)), t0, c0);
  c1 = _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_loadu_ps(sbj + 8)), t1, c1);
  if (j < g.J - 1) {
    _mm256_storeu_ps(c + r * kNR, c0);
    _mm256_storeu_ps(c + r * kNR + 8, c1);
  } else if (out.f32 != nullptr) {
    _mm256_storeu_ps(out.f32 + r * out.ld, c0);
    _mm256_storeu_ps(out.f32 + r * out.ld + 8, c1);
  } else {
    store_bf16x16_avx2(c0, c1, out.bf16 + r * out.ld);
  }
}

// One out tile: R rows of a (FP32 code values, row stride lda) against one panel of b, over
// every K block. sa: the rows' scales (R x J); sb: the panel's columns' scales, block j's at
// sb + j P kNR; c: R x kNR floats, the running sums between K blocks.
template <int R>
H2_AVX2_FMA void tile(const Geometry& g, const float* a, int64_t lda, const float* panel,
                      const float* sa, const float* sb, float* c, const TileOut& out) {
  for (int64_t j = 0; j < g.J; ++j) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const int64_t k0 = j * g.kb, width = std::min(g.kb, g.K - k0);
    const float* bj = panel + k0 * kNR;
    const float* aj = a + k0;
#pragma GCC unroll 2
    for (int64_t k = 0; k < width; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(bj + (k + kPrefetchSteps) * kNR), _MM_HINT_T0);
      const __m256 b0 = _mm256_loadu_ps(bj + k * kNR);
      const __m256 b1 = _mm256_loadu_ps(bj + k * kNR + 8);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 av = _mm256_broadcast_ss(aj + r * lda + k);
        acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) promote_row(g, j, r, acc[r][0], acc[r][1], sa, sb, c, out);
  }
}

using TileFn = void (*)(const Geometry&, const float*, int64_t, const float*, const float*,
                        const float*, float*, const TileOut&);
template <int... I>
constexpr std::array<TileFn, kMR> tile_table(std::integer_sequence<int, I...>) {
  return {&tile<I + 1>...};
}
constexpr std::array<TileFn, kMR> kTiles = tile_table(std::make_integer_sequence<int, kMR>{});

// b's panels: panel p holds rows [p kNR, (p + 1) kNR) of b as FP32 code values, K x kNR (zeros
// past N). One-byte codes are put in the panel's order as codes, a chunk at a time
// (transpose_bytes; rows past N are code 0, +0), then decoded in one call into place; E2M1's
// nibbles, and local values of scales along K, are decoded row by row and the values transposed
// (transpose_to_f32). (Decoding rows first and transposing their FP32 values took 1.5% of an
// fp8_blockwise step on the AVX2 path.)
void pack_b(const QuantOperand& b, const Geometry& g, KBlockValues values, float* packed) {
  constexpr int64_t kChunk = 256;  // even, for E2M1's bytes
  const bool bytes = b.element() != lowp::Format::e2m1 && values == KBlockValues::codes;
  parallel_for(g.P, kNR * g.K, [&](int64_t p0, int64_t p1) {
    alignas(32) uint8_t codes[kNR * kChunk];
    const std::unique_ptr<float[]> rows(bytes ? nullptr : new float[size_t(kNR * kChunk)]);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kNR, n = std::min(kNR, g.N - n0);
      float* panel = packed + p * g.K * kNR;
      for (int64_t k0 = 0; k0 < g.K; k0 += kChunk) {
        const int64_t len = std::min(kChunk, g.K - k0);
        if (bytes) {
          if (n < kNR) std::fill_n(codes, len * kNR, uint8_t(0));
          transpose_bytes(b.row_codes(n0, k0), g.K, n, 0, len, codes, kNR);
          b.decode_codes(codes, len * kNR, panel + k0 * kNR);
          continue;
        }
        for (int64_t i = 0; i < kNR; ++i) {
          if (i < n) {  // code values (FP32 scales) or local values
            b.decode_row(n0 + i, k0, len, rows.get() + i * kChunk, /*local=*/true);
          } else {
            std::fill_n(rows.get() + i * kChunk, len, 0.0f);
          }
        }
        transpose_to_f32(rows.get(), kChunk, kNR, len, panel + k0 * kNR, kNR);
      }
    }
  });
}

// The rows of the tile that starts at row t of a block of `rows`: 6 or 5 where every tile can
// have at least 5 (tiles of 6 first), so that no tile is short of the accumulators that keep both
// FMA units busy (a 2-row tile, the last of 32 rows, ran at half speed); else 6 and the rest.
int64_t rows_of_tile(int64_t rows, int64_t t) {
  const int64_t tiles = ceil_div(rows, kMR), sixes = rows - (kMR - 1) * tiles;
  if (sixes < 0) return std::min<int64_t>(kMR, rows - t);
  return t < sixes * kMR ? kMR : kMR - 1;
}

// An edge panel's tile (w < kNR of its columns out's) goes through an f32 buffer: out's values
// first where beta reads them, the sums copied back to out after.
struct EdgeTile {
  float values[kMR * kNR] = {};

  TileOut load(const float* f32, const bf16_t* bf16, int64_t ld, int rows, int64_t w, float beta) {
    if (beta != 0)
      for (int r = 0; r < rows; ++r)
        for (int64_t n = 0; n < w; ++n)
          values[r * kNR + n] =
              f32 != nullptr ? f32[r * ld + n] : bf16_to_f32(bf16[r * ld + n].bits);
    return {.f32 = values, .bf16 = nullptr, .ld = kNR, .beta = beta};
  }
  void store(float* f32, bf16_t* bf16, int64_t ld, int rows, int64_t w) const {
    for (int r = 0; r < rows; ++r)
      for (int64_t n = 0; n < w; ++n) {
        const float v = values[r * kNR + n];
        if (f32 != nullptr) {
          f32[r * ld + n] = v;
        } else {
          bf16[r * ld + n].bits = f32_to_bf16(v);
        }
      }
  }
};

}  // namespace

bool kblock_gemm_avx2_runs_here() {
  return cpu_has(CpuFeature::avx2) && cpu_has(CpuFeature::fma);
}

void kblock_gemm_avx2(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                      KBlockValues values, Stream& stream) {
  H2_CHECK(kblock_gemm_avx2_runs_here(),
           "qmatmul's AVX2 K-block GEMM needs AVX2 and FMA, which this CPU lacks or "
           "H2_CPU_MAX_ISA={} hides",
           cpu_isa_level_name(cpu_isa_cap()));
  Geometry g{};
  g.M = args.a.rows();
  g.N = args.b.rows();
  g.K = args.a.cols();
  const bool codes = values == KBlockValues::codes;
  g.kb = codes ? a.block_cols() : g.K;
  g.J = ceil_div(g.K, g.kb);
  g.P = ceil_div(g.N, kNR);
  H2_CHECK(!codes || b.block_cols() == g.kb, "cpu qmatmul: K blocks of {} and {} columns", g.kb,
           b.block_cols());
  H2_CHECK(g.K > 0, "cpu qmatmul: kblock_gemm_avx2 needs K > 0 (the caller scales out for K = 0)");
  const bool f32_out = args.out.dtype() == DType::f32;
  H2_CHECK(f32_out || args.out.dtype() == DType::bf16,
           "cpu qmatmul: kblock_gemm_avx2 writes f32 or bf16, not {}",
           dtype_name(args.out.dtype()));

  ScratchBuffer<float> packed(stream, size_t(g.P * g.K * kNR));
  pack_b(b, g, values, packed.data());
  // The scales: b's of each K block (1 for local values), a's times alpha below (times both
  // operands' factors for local values).
  ScratchBuffer<float> sb(stream, size_t(g.J * g.P * kNR));
  for (int64_t j = 0; j < g.J; ++j)
    for (int64_t n = 0; n < g.P * kNR; ++n)
      sb.data()[j * g.P * kNR + n] = n >= g.N ? 0.0f
                                     : codes  ? b.scale(n / b.block_rows(), j)
                                              : 1.0f;
  const float alpha = codes ? args.alpha : args.alpha * a.bf16_factor() * b.bf16_factor();

  const int64_t row_block = std::clamp(kRowBlockBytes / int64_t(sizeof(float)) / g.K / kMR * kMR,
                                       int64_t{kMR}, kMaxRowBlock);
  float* out32 = f32_out ? args.out.data_as<float>() : nullptr;
  bf16_t* out16 = f32_out ? nullptr : args.out.data_as<bf16_t>();
  parallel_for(g.M, g.N * g.K, [&](int64_t r0, int64_t r1) {
    const int64_t rows_max = std::min(row_block, r1 - r0);
    const std::unique_ptr<float[]> a32(new float[size_t(rows_max * g.K)]);
    const std::unique_ptr<float[]> sa(new float[size_t(rows_max * g.J)]);
    alignas(32) float c[kMR * kNR];
    EdgeTile edge;
    for (int64_t i0 = r0; i0 < r1; i0 += row_block) {
      const int64_t rows = std::min(row_block, r1 - i0);
      if (codes) {
        a.decode_codes_rows(i0, rows, a32.get());
      } else {
        for (int64_t i = 0; i < rows; ++i)
          a.decode_row(i0 + i, 0, g.K, a32.get() + i * g.K, /*local=*/true);
      }
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < g.J; ++j)
          sa[size_t(i * g.J + j)] = codes ? alpha * a.scale((i0 + i) / a.block_rows(), j) : alpha;
      for (int64_t p = 0; p < g.P; ++p) {
        const int64_t n0 = p * kNR, w = std::min(kNR, g.N - n0);
        for (int64_t t = 0, tile_rows = 0; t < rows; t += tile_rows) {
          tile_rows = rows_of_tile(rows, t);
          const int64_t at = (i0 + t) * g.N + n0;
          float* f32 = f32_out ? out32 + at : nullptr;
          bf16_t* bf16 = f32_out ? nullptr : out16 + at;
          const TileOut out = w == kNR ? TileOut{f32, bf16, g.N, args.beta}
                                       : edge.load(f32, bf16, g.N, int(tile_rows), w, args.beta);
          kTiles[size_t(tile_rows - 1)](g, a32.get() + t * g.K, g.K, packed.data() + p * g.K * kNR,
                                        sa.get() + t * g.J, sb.data() + n0, c, out);
          if (w < kNR) edge.store(f32, bf16, g.N, int(tile_rows), w);
        }
      }
    }
  });
}

#undef H2_AVX2_FMA

}  // namespace h2::cpu
