// fp8_blockwise's GEMM with per-K-block promotion (kblock_gemm.h), for CPUs with AVX512_BF16.
//
// Shapes: M rows of a and out; N rows of b (columns of out); K the reduction extent, in J blocks
// of kb columns (the last one possibly narrower); Kp: K rounded up to even, since vdpbf16ps takes
// bf16 pairs along K (a zero pads an odd K); Ks: the stride of a's decoded rows and of b's panels,
// Kp (or, on the AMX path below, Kp rounded up to 32), zeros past K. Tiles of out are MR x NR (12 x
// 32: 24 accumulator registers, two of b's vectors and a broadcast of a's pair); P = ceil(N / NR)
// panels of b.
//
// Algorithm. b's codes are decoded once into panels packed as pairs: panel p holds rows
// [p NR, (p + 1) NR) of b (zeros past N) as Ks / 2 pairs x NR columns x 2, so one 64-byte load is
// pair q of 32 rows (one-byte codes are put in this order as codes, a chunk at a time, then decoded
// in place). Each thread takes an equal run of a's rows in tiles of MR from its first, decodes a
// tile's rows (row stride Ks) into its own buffer, which stays in L1, and runs them across every
// panel: for each K block the tile's products go into 24 registers, pair by pair (vdpbf16ps: each
// product of two bf16 values exact in FP32, summed in FP32 in K order), and are then promoted into
// the tile's FP32 accumulator, c += (alpha s_a(i) s_b(n)) * T(i, n), block after block, the first
// block starting from beta * out read by the tile itself (from 0, out not read, when beta is 0);
// the last block's sums are rounded to out's dtype and stored from the registers. These are the
// promotions of qmatmul.cpp's oneDNN route, in the same order (oneDNN may order a block's own sums
// otherwise), without its FP32 tiles of T in memory and the pass that rescales them. The scales:
// s_a (M x J, alpha folded in) and s_b (J x P NR, zeros past N).
//
// AMX. Where the CPU has AMX-BF16 and K blocks are multiples of 32 wide, tiles of out are 32 x 32
// and the tile unit sums each block's products, which are then stored to L1 and promoted from
// there as above, while the tile unit sums the next block (kblock_amx.cpp). a's tile rows and b's
// panels are padded with zeros to Ks (Kp rounded up to 32, the panels' stride).
#include "backends/cpu/kernels/kblock_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kblock_tiles.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half_float.h"

namespace h2::cpu {

using namespace kblock;

namespace {

constexpr int kMR = 12;            // rows of an out tile on the AVX-512 path
constexpr __mmask8 kAll64 = 0xff;  // every lane of 8 (see kAll)

// Row r's promotion of block j alone, its sums in registers.
H2_AVX512_BF16 inline void promote_row(const Geometry& g, int64_t j, int r, __m512 t0, __m512 t1,
                                       const float* sa, const float* sb, float* c,
                                       const TileOut& out) {
  const OutColumns m(out);
  const __m512 s = _mm512_set1_ps(sa[r * g.J + j]);
  RowSums sums = promotion_start(j, r, c, out, m);
  sums.c0 = _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_loadu_ps(sb + j * g.P * kNR)), t0, sums.c0);
  sums.c1 =
      _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_loadu_ps(sb + j * g.P * kNR + 16)), t1, sums.c1);
  promotion_end(j == g.J - 1, r, sums, c, out, m);
}

// One out tile: R rows of a (row stride lda) against panel `panel` of b, over every K block.
// c: R x kNR floats, the running sums between K blocks (its contents on entry are ignored); the
// promoted sums are stored to `out`.
template <int R>
H2_AVX512_BF16 void tile(const Geometry& g, const uint16_t* a, int64_t lda, const uint16_t* panel,
                         const float* sa, const float* sb, float* c, const TileOut& out) {
  for (int64_t j = 0; j < g.J; ++j) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const int64_t pairs = (std::min(g.kb, g.K - j * g.kb) + 1) / 2;
    const uint16_t* bj = panel + j * (g.kb / 2) * kNR * 2;
    const uint16_t* aj = a + j * g.kb;
    for (int64_t q = 0; q < pairs; ++q) {
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bj + q * kNR * 2);
      const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bj + q * kNR * 2 + kNR);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        int32_t pair;
        std::memcpy(&pair, aj + r * lda + 2 * q, sizeof pair);
        const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
      }
    }
    // (Unrolled, so that the accumulators stay in registers: rolled, GCC stored all 24 to the
    // stack to index them, and the promotion cost 3-5% of the qmatmuls.)
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) promote_row(g, j, r, acc[r][0], acc[r][1], sa, sb, c, out);
  }
}

struct AlignedFree {
  void operator()(uint16_t* p) const { std::free(p); }
};
// rows x ld bf16 values, 64-byte aligned; zeroed where `zero` (AMX reads rows not yet decoded).
uint16_t* aligned_rows(int64_t rows, int64_t ld, bool zero) {
  const size_t bytes = (size_t(rows * ld) * sizeof(uint16_t) + 63) / 64 * 64;
  auto* p = static_cast<uint16_t*>(std::aligned_alloc(64, bytes));
  H2_CHECK(p != nullptr, "cpu qmatmul: kblock_gemm could not allocate {} bytes", bytes);
  if (zero) std::memset(p, 0, bytes);
  return p;
}

using TileFn = void (*)(const Geometry&, const uint16_t*, int64_t, const uint16_t*, const float*,
                        const float*, float*, const TileOut&);
template <int... I>
constexpr std::array<TileFn, kMR> tile_table(std::integer_sequence<int, I...>) {
  return {&tile<I + 1>...};
}
constexpr std::array<TileFn, kMR> kTiles = tile_table(std::make_integer_sequence<int, kMR>{});

// The transpose of a 16 x 16 matrix of 32-bit elements in registers: r[i] holds row i on entry
// and column i on return. Four rounds of interleaving (32-bit, 64-bit, then 128-bit lanes twice),
// the standard 16 x 16 transpose.
H2_AVX512_BF16 inline void transpose_registers16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int k = 0; k < 2; ++k) {
      r[i + k] = _mm512_maskz_unpacklo_epi64(kAll64, t[i + k], t[i + k + 2]);
      r[i + k + 2] = _mm512_maskz_unpackhi_epi64(kAll64, t[i + k], t[i + k + 2]);
    }
  for (int i = 0; i < 16; i += 8)
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_maskz_shuffle_i32x4(kAll, r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_maskz_shuffle_i32x4(kAll, r[i + k], r[i + k + 4], 0xdd);
    }
  // After the last round register j holds column kColumn[j]: the 64-bit interleave leaves the
  // middle two of each four swapped. (Renaming only: the loops are unrolled.)
  constexpr int kColumn[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
  for (int k = 0; k < 8; ++k) {
    r[kColumn[k]] = _mm512_maskz_shuffle_i32x4(kAll, t[k], t[k + 8], 0x88);
    r[kColumn[k + 8]] = _mm512_maskz_shuffle_i32x4(kAll, t[k], t[k + 8], 0xdd);
  }
}

// dst[c * dst_ld + r] = src[r * src_ld + c] for r < 16 and c < 16, 32-bit elements.
H2_AVX512_BF16 void transpose16x16(const uint32_t* src, int64_t src_ld, uint32_t* dst,
                                   int64_t dst_ld) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * src_ld);
  transpose_registers16x16(r);
  for (int j = 0; j < 16; ++j) _mm512_storeu_si512(dst + j * dst_ld, r[j]);
}

// Codes [k, k + 64) of a panel's 32 rows of one-byte codes (K per row; rows past n read as
// code 0, which is +0 in E4M3 and E5M2; codes past K as well, and their pairs not stored) in
// pack_b's pair layout: dst[(q * kNR + i) * 2 + e] = code (i, k + 2 q + e), 64 bytes per pair q.
// Each half of the rows is transposed as 32-bit words (four codes, two pairs, per word), then
// one permute per pair takes its 16-bit halves from both: the even ones are pair 2 w of word w,
// the odd ones pair 2 w + 1.
H2_AVX512_BF16 void pack_code_pairs(const uint8_t* codes, int64_t K, int64_t n, int64_t k,
                                    uint8_t* dst) {
  const int64_t left = K - k;  // even: pack_b takes this path for an even K only
  const __mmask64 columns = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
  __m512i lo[16], hi[16];
  for (int i = 0; i < 16; ++i) {
    lo[i] = _mm512_maskz_loadu_epi8(i < n ? columns : 0, codes + (i < n ? i : 0) * K + k);
    hi[i] = _mm512_maskz_loadu_epi8(i + 16 < n ? columns : 0,
                                    codes + (i + 16 < n ? i + 16 : 0) * K + k);
  }
  transpose_registers16x16(lo);
  transpose_registers16x16(hi);
  alignas(64) static constexpr uint16_t kEven[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                     22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                     44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
  const __m512i even = _mm512_load_si512(kEven);
  const __m512i odd = _mm512_add_epi16(even, _mm512_set1_epi16(1));
  constexpr __mmask32 kAllWords = 0xffffffff;
  const int64_t pairs = std::min<int64_t>(32, left / 2);
  for (int w = 0; w < 16 && 2 * w < pairs; ++w) {
    _mm512_storeu_si512(dst + 2 * w * 64,
                        _mm512_maskz_permutex2var_epi16(kAllWords, lo[w], even, hi[w]));
    if (2 * w + 1 < pairs)
      _mm512_storeu_si512(dst + (2 * w + 1) * 64,
                          _mm512_maskz_permutex2var_epi16(kAllWords, lo[w], odd, hi[w]));
  }
}

// Rows [first, first + rows) of q's code values as bf16 bits, ld apart (Kp or Ks), each padded
// with zeros past K.
void decode_padded_rows(const QuantOperand& q, const Geometry& g, int64_t first, int64_t rows,
                        int64_t ld, uint16_t* dst) {
  if (ld == g.K) return q.decode_codes_bf16_rows(first, rows, dst);
  for (int64_t i = 0; i < rows; ++i) {
    q.decode_codes_bf16_rows(first + i, 1, dst + i * ld);
    std::fill(dst + i * ld + g.K, dst + (i + 1) * ld, uint16_t(0));
  }
}

// Panels of b packed as pairs (see the file comment). One-byte codes with an even K: each chunk
// of a panel's codes rearranged into the pair layout (pack_code_pairs), then decoded in one call
// into place, so that the rearranged codes and their values stay in L1 (decoding whole rows
// first and transposing their bf16 values read 64 KiB rows back from L2 for K = 1024, and took
// 4.1% of an fp8_blockwise step). Otherwise (E2M1's nibbles, an odd K) a panel's rows decoded in
// one call, then transposed as 32-bit words (a pair each).
void pack_b(const QuantOperand& b, const Geometry& g, uint16_t* packed) {
  if (b.element() != lowp::Format::e2m1 && g.Kp == g.K) {
    parallel_for(g.P, kNR * g.K, [&](int64_t p0, int64_t p1) {
      constexpr int64_t kChunk = 256;  // codes of a row per decode call: 8 KiB of codes
      alignas(64) uint8_t pairs[kNR * kChunk];
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * kNR, n = std::min(kNR, g.N - n0);
        uint16_t* dst = packed + p * g.Ks * kNR;
        for (int64_t k0 = 0; k0 < g.K; k0 += kChunk) {
          const int64_t len = std::min(kChunk, g.K - k0);
          for (int64_t k = k0; k < k0 + len; k += 64)
            pack_code_pairs(b.row_codes(n0, 0), g.K, n, k, pairs + (k - k0) * kNR);
          b.decode_codes_bf16(pairs, len * kNR, dst + k0 * kNR);
        }
        std::fill(dst + g.Kp * kNR, dst + g.Ks * kNR, uint16_t(0));
      }
    });
    return;
  }
  parallel_for(g.P, kNR * g.Kp, [&](int64_t p0, int64_t p1) {
    // The panel's rows (uninitialised: every element is written below; a zeroed vector here was
    // a memset of up to 64 KiB per call).
    const std::unique_ptr<uint16_t[]> rows(new uint16_t[size_t(kNR * g.Kp)]);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kNR, n = std::min(kNR, g.N - n0);
      decode_padded_rows(b, g, n0, n, g.Kp, rows.get());
      std::fill(rows.get() + n * g.Kp, rows.get() + kNR * g.Kp, uint16_t(0));  // rows past N
      uint16_t* panel = packed + p * g.Ks * kNR;
      std::fill(panel + g.Kp * kNR, panel + g.Ks * kNR, uint16_t(0));
      auto* dst = reinterpret_cast<uint32_t*>(panel);
      const auto* src = reinterpret_cast<const uint32_t*>(rows.get());
      const int64_t pairs = g.Kp / 2, whole = pairs / 16 * 16;
      for (int64_t i = 0; i < kNR; i += 16)
        for (int64_t q = 0; q < whole; q += 16)
          transpose16x16(src + i * pairs + q, pairs, dst + q * kNR + i, kNR);
      for (int64_t i = 0; i < kNR; ++i)
        for (int64_t q = whole; q < pairs; ++q) dst[q * kNR + i] = src[i * pairs + q];
    }
  });
}

}  // namespace

bool kblock_gemm_suits(int64_t kb) {
  return !cpu_has(CpuFeature::amx_bf16) || amx_takes(kb);
}

bool kblock_gemm_runs_here() {  // H2_AVX512_BF16's features
  return cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw) &&
         cpu_has(CpuFeature::avx512dq) && cpu_has(CpuFeature::avx512vl) &&
         cpu_has(CpuFeature::avx512_bf16);
}

void kblock_gemm(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                 Stream& stream) {
  // The route is chosen once per device (kblock_kernel_from_env checks it); this guards a
  // KernelContext made with it by hand from an illegal instruction.
  H2_CHECK(kblock_gemm_runs_here(),
           "fp8_blockwise's H2 K-block GEMM needs AVX512F/BW/DQ/VL and AVX512_BF16, which this "
           "CPU lacks or H2_CPU_MAX_ISA={} hides",
           cpu_isa_level_name(cpu_isa_cap()));
  Geometry g{};
  g.M = args.a.rows();
  g.N = args.b.rows();
  g.K = args.a.cols();
  g.Kp = g.K + (g.K & 1);
  g.kb = a.block_cols();
  g.J = ceil_div(g.K, g.kb);
  g.P = ceil_div(g.N, kNR);
  H2_CHECK(g.kb % 2 == 0 && b.block_cols() == g.kb, "cpu qmatmul: K blocks of {} and {} columns",
           g.kb, b.block_cols());
  H2_CHECK(g.K > 0, "cpu qmatmul: kblock_gemm needs K > 0 (the caller scales out for K = 0)");
  // AMX's tiles where the CPU has them (H2_CPU_MAX_ISA may hide them) and a K block is whole steps
  // of 32; Linux grants a process the tiles' state on request.
  const bool amx = amx_takes(g.kb) && request_amx_state();
  g.Ks = amx ? ceil_div(g.Kp, 32) * 32 : g.Kp;
  const int64_t tile_rows = amx ? kAmxRows : kMR;
  // b's scale is the same across each panel: its blocks span whole panels.
  const bool uniform = b.block_rows() % kNR == 0 || b.block_rows() >= g.N;

  ScratchBuffer<uint16_t> packed(stream, size_t(g.P * g.Ks * kNR));
  pack_b(b, g, packed.data());
  ScratchBuffer<float> sb(stream, size_t(g.J * g.P * kNR));
  for (int64_t j = 0; j < g.J; ++j)
    for (int64_t n = 0; n < g.P * kNR; ++n)
      sb.data()[j * g.P * kNR + n] = n < g.N ? b.scale(n / b.block_rows(), j) : 0.0f;

  const bool f32_out = args.out.dtype() == DType::f32;
  H2_CHECK(f32_out || args.out.dtype() == DType::bf16,
           "cpu qmatmul: kblock_gemm writes f32 or bf16, not {}", dtype_name(args.out.dtype()));
  // Threads take equal runs of rows, tiled from their first: whole tiles from row 0 gave the
  // first thread 132 of a weight gradient's 256 rows (11 tiles against 10 and one of 4 rows).
  parallel_for(g.M, g.N * g.K, [&](int64_t r0, int64_t r1) {
    // This thread's decoded tile of a (tile_rows x Ks, 64-byte rows for AMX's loads; AMX reads
    // all 16 rows of each tile of a short one: zeros, or the rows of the thread's tile before)
    // and its rows' scales (tile_rows x J, alpha folded in).
    const std::unique_ptr<uint16_t[], AlignedFree> a16(aligned_rows(tile_rows, g.Ks, amx));
    const std::unique_ptr<float[]> sa(new float[size_t(tile_rows * g.J)]);
    alignas(64) float c[kAmxRows * kNR];
    if (amx) load_amx_config();
    for (int64_t i0 = r0; i0 < r1; i0 += tile_rows) {
      const int64_t rows = std::min<int64_t>(tile_rows, r1 - i0);
      decode_padded_rows(a, g, i0, rows, g.Ks, a16.get());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < g.J; ++j)
          sa[size_t(i * g.J + j)] = args.alpha * a.scale((i0 + i) / a.block_rows(), j);
      const PanelOuts outs{
          .g = g,
          .f32 = f32_out ? args.out.data_as<float>() + i0 * g.N : nullptr,
          .bf16 = f32_out ? nullptr : &args.out.data_as<bf16_t>()[i0 * g.N].bits,
          .beta = args.beta,
          .rows = rows,
          .next_rows = std::min<int64_t>(tile_rows, std::max<int64_t>(0, r1 - i0 - tile_rows))};
      if (amx) {
        amx_row_of_tiles(g, int(rows), uniform, a16.get(), g.Ks, packed.data(), sa.get(), sb.data(),
                         c, outs);
        continue;
      }
      for (int64_t p = 0; p < g.P; ++p)
        kTiles[size_t(rows - 1)](g, a16.get(), g.Ks, packed.data() + p * g.Ks * kNR, sa.get(),
                                 sb.data() + p * kNR, c, outs(p));
    }
    if (amx) release_amx();
  });
}

}  // namespace h2::cpu
