// The FP32 K-block GEMM's driver (kblock_fp32.h), for any vector width's tiles. b's codes are
// decoded once into panels of FP32 code values, K x nr each (pack_b); each thread takes an equal
// run of a's rows, decodes RB of them at a time (row stride K; RB a multiple of mr, their FP32
// values about kRowBlockBytes) and runs their tiles panel by panel, so that a panel stays in L1 or
// L2 for RB / mr tiles. A block's tiles have mr or mr - 1 rows where they can (rows_of_tile).
// Operands whose scales fold into exact values (KBlockValues::local: MX, NVFP4) go as their local
// values in one block over K, the products and sums of qmatmul's exact bf16 GEMM. This replaces
// qmatmul.cpp's FP32 route for these operands (FP32 tiles of scaled values into a library SGEMM,
// which packs both again), whose sums are over the whole of K at once.
#include "backends/cpu/kernels/kblock_fp32.h"

#include <algorithm>
#include <memory>

#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/kernels/transpose.h"
#include "core/error.h"

namespace h2::cpu::kblock_fp32 {
namespace {

constexpr int64_t kRowBlockBytes = 192 << 10;  // a's decoded rows per block, about
constexpr int64_t kMaxRowTiles = 20;           // tiles of rows per block at most

// b's panels: panel p holds rows [p nr, (p + 1) nr) of b as FP32 code values, K x nr (zeros past
// N). One-byte codes are put in the panel's order as codes, a chunk at a time (transpose_bytes;
// rows past N are code 0, +0), then decoded in one call into place; E2M1's nibbles, and local
// values of scales along K, are decoded row by row and the values transposed (transpose_to_f32).
// (Decoding rows first and transposing their FP32 values took 1.5% of an fp8_blockwise step on
// the AVX2 path.)
void pack_b(const QuantOperand& b, const Geometry& g, KBlockValues values, int64_t nr,
            float* packed) {
  constexpr int64_t kChunk = 256;  // even, for E2M1's bytes
  const bool bytes = b.element() != lowp::Format::e2m1 && values == KBlockValues::codes;
  parallel_for(g.P, nr * g.K, [&](int64_t p0, int64_t p1) {
    alignas(64) uint8_t codes[kMaxNR * kChunk];
    const std::unique_ptr<float[]> rows(bytes ? nullptr : new float[size_t(nr * kChunk)]);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * nr, n = std::min(nr, g.N - n0);
      float* panel = packed + p * g.K * nr;
      for (int64_t k0 = 0; k0 < g.K; k0 += kChunk) {
        const int64_t len = std::min(kChunk, g.K - k0);
        if (bytes) {
          if (n < nr) std::fill_n(codes, len * nr, uint8_t(0));
          transpose_bytes(b.row_codes(n0, k0), g.K, n, 0, len, codes, nr);
          b.decode_codes(codes, len * nr, panel + k0 * nr);
          continue;
        }
        for (int64_t i = 0; i < nr; ++i) {
          if (i < n) {  // code values (FP32 scales) or local values
            b.decode_row(n0 + i, k0, len, rows.get() + i * kChunk, /*local=*/true);
          } else {
            std::fill_n(rows.get() + i * kChunk, len, 0.0f);
          }
        }
        transpose_to_f32(rows.get(), kChunk, nr, len, panel + k0 * nr, nr);
      }
    }
  });
}

// The rows of the tile that starts at row t of a block of `rows`: mr or mr - 1 where every tile
// can have at least mr - 1 (tiles of mr first), so that no tile is short of the accumulators that
// keep both FMA units busy (on AVX2 a 2-row tile, the last of 32 rows, ran at half speed); else
// mr and the rest.
int64_t rows_of_tile(int64_t rows, int64_t t, int mr) {
  const int64_t tiles = ceil_div(rows, mr), full = rows - (mr - 1) * tiles;
  if (full < 0) return std::min<int64_t>(mr, rows - t);
  return t < full * mr ? mr : mr - 1;
}

// An edge panel's tile (w < nr of its columns out's) goes through an f32 buffer: out's values
// first where beta reads them, the sums copied back to out after.
struct EdgeTile {
  int64_t nr;
  float values[kMaxMR * kMaxNR] = {};

  TileOut load(const float* f32, const bf16_t* bf16, int64_t ld, int rows, int64_t w, float beta) {
    if (beta != 0)
      for (int r = 0; r < rows; ++r)
        for (int64_t n = 0; n < w; ++n)
          values[r * nr + n] =
              f32 != nullptr ? f32[r * ld + n] : bf16_to_f32(bf16[r * ld + n].bits);
    return {.f32 = values, .bf16 = nullptr, .ld = nr, .beta = beta};
  }
  void store(float* f32, bf16_t* bf16, int64_t ld, int rows, int64_t w) const {
    for (int r = 0; r < rows; ++r)
      for (int64_t n = 0; n < w; ++n) {
        const float v = values[r * nr + n];
        if (f32 != nullptr) {
          f32[r * ld + n] = v;
        } else {
          bf16[r * ld + n].bits = f32_to_bf16(v);
        }
      }
  }
};

}  // namespace

void kblock_gemm_fp32(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                      KBlockValues values, const TileSet& tiles, Stream& stream) {
  const int mr = tiles.mr;
  const int64_t nr = tiles.nr;
  H2_CHECK(mr >= 2 && mr <= kMaxMR && nr <= kMaxNR && tiles.tiles.size() == size_t(mr),
           "cpu qmatmul: a K-block tile set of {} x {} with {} tiles", mr, nr, tiles.tiles.size());
  Geometry g{};
  g.M = args.a.rows();
  g.N = args.b.rows();
  g.K = args.a.cols();
  const bool codes = values == KBlockValues::codes;
  g.kb = codes ? a.block_cols() : g.K;
  g.J = ceil_div(g.K, g.kb);
  g.P = ceil_div(g.N, nr);
  H2_CHECK(!codes || b.block_cols() == g.kb, "cpu qmatmul: K blocks of {} and {} columns", g.kb,
           b.block_cols());
  H2_CHECK(g.K > 0,
           "cpu qmatmul: the FP32 K-block GEMM needs K > 0 (the caller scales out for "
           "K = 0)");
  const bool f32_out = args.out.dtype() == DType::f32;
  H2_CHECK(f32_out || args.out.dtype() == DType::bf16,
           "cpu qmatmul: the FP32 K-block GEMM writes f32 or bf16, not {}",
           dtype_name(args.out.dtype()));

  ScratchBuffer<float> packed(stream, size_t(g.P * g.K * nr));
  pack_b(b, g, values, nr, packed.data());
  // The scales: b's of each K block (1 for local values), a's times alpha below (times both
  // operands' factors for local values).
  ScratchBuffer<float> sb(stream, size_t(g.J * g.P * nr));
  for (int64_t j = 0; j < g.J; ++j)
    for (int64_t n = 0; n < g.P * nr; ++n)
      sb.data()[j * g.P * nr + n] = n >= g.N ? 0.0f : codes ? b.scale(n / b.block_rows(), j) : 1.0f;
  const float alpha = codes ? args.alpha : args.alpha * a.bf16_factor() * b.bf16_factor();

  const int64_t row_block = std::clamp(kRowBlockBytes / int64_t(sizeof(float)) / g.K / mr * mr,
                                       int64_t{mr}, kMaxRowTiles * mr);
  float* out32 = f32_out ? args.out.data_as<float>() : nullptr;
  bf16_t* out16 = f32_out ? nullptr : args.out.data_as<bf16_t>();
  parallel_for(g.M, g.N * g.K, [&](int64_t r0, int64_t r1) {
    const int64_t rows_max = std::min(row_block, r1 - r0);
    const std::unique_ptr<float[]> a32(new float[size_t(rows_max * g.K)]);
    const std::unique_ptr<float[]> sa(new float[size_t(rows_max * g.J)]);
    alignas(64) float c[kMaxMR * kMaxNR];
    EdgeTile edge{.nr = nr};
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
        const int64_t n0 = p * nr, w = std::min(nr, g.N - n0);
        for (int64_t t = 0, tile_rows = 0; t < rows; t += tile_rows) {
          tile_rows = rows_of_tile(rows, t, mr);
          const int64_t at = (i0 + t) * g.N + n0;
          float* f32 = f32_out ? out32 + at : nullptr;
          bf16_t* bf16 = f32_out ? nullptr : out16 + at;
          const TileOut out = w == nr ? TileOut{f32, bf16, g.N, args.beta}
                                      : edge.load(f32, bf16, g.N, int(tile_rows), w, args.beta);
          tiles.tiles[size_t(tile_rows - 1)](g, a32.get() + t * g.K, g.K,
                                             packed.data() + p * g.K * nr, sa.get() + t * g.J,
                                             sb.data() + n0, c, out);
          if (w < nr) edge.store(f32, bf16, g.N, int(tile_rows), w);
        }
      }
    }
  });
}

}  // namespace h2::cpu::kblock_fp32
