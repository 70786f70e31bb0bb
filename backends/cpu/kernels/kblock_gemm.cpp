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
// AMX. Where the CPU has AMX-BF16 and K blocks are multiples of 32 wide, tiles of out are 16 x 32
// and the tile unit sums each block's products (tile_amx: 16 pairs of K per step), which are then
// stored to L1 and promoted from there as above. a's tile rows and b's panels are padded with
// zeros to Ks (Kp rounded up to 32, the panels' stride), so that a narrower last block's steps
// stay whole. The tile unit orders a block's sums its own way: the two paths differ in the last
// bits, as the oneDNN route does.
#include "backends/cpu/kernels/kblock_gemm.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/half_float.h"

namespace h2::cpu {
namespace {

constexpr int kMR = 12;      // rows of an out tile
constexpr int64_t kNR = 32;  // columns of an out tile: two 16-float vectors
#define H2_AVX512_BF16 [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")]]
// Every lane: the zero-masked forms of the intrinsics below, whose unmasked forms start from
// _mm512_undefined_epi32 and draw GCC 12's false "may be used uninitialized" warnings.
constexpr __mmask16 kAll = 0xffff;
constexpr __mmask8 kAll64 = 0xff;

struct Geometry {
  int64_t M, N, K, Kp, kb, J, P;
  int64_t Ks;  // K extent of a packed panel and of a decoded row of a: Kp, or (AMX) Kp rounded
               // up to 32, zeros past Kp
};

// Where a tile's rows go: out's f32 or bf16 row-major (M, N) storage at row i0, column n0, w
// columns of the tile's kNR valid; out's own values times beta are where the sums start (not
// read where beta is 0).
struct TileOut {
  float* f32;
  uint16_t* bf16;  // bits; rounded to nearest even as f32_to_bf16 does
  int64_t ld, w;
  float beta;
};

// beta times 16 values of out's row r from column `half` * 16 on (those of `mask`; 0 elsewhere),
// as FP32: what the first K block's promotion adds to.
H2_AVX512_BF16 inline __m512 scaled_out(const TileOut& out, int r, int half, __mmask16 mask) {
  const int64_t at = r * out.ld + half * 16;
  const __m512 x =
      out.f32 != nullptr
          ? _mm512_maskz_loadu_ps(mask, out.f32 + at)
          : _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
                kAll,
                _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(mask, out.bf16 + at)),
                16));
  return _mm512_mul_ps(_mm512_set1_ps(out.beta), x);
}

// Stores 16 floats (those of `mask`) as bf16 bits: round to nearest even, NaN made quiet, as
// f32_to_bf16. (Not FloatOut::commit, f32_to_bf16's loop: writing the tiles through it made the
// forward qmatmul of the gate projection, bf16 out, 4.5% slower: 0.945 -> 0.990 ms.)
H2_AVX512_BF16 inline void store_bf16(uint16_t* dst, __m512 v, __mmask16 mask) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_maskz_srli_epi32(
      kAll, _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(0x0040));
  _mm256_mask_storeu_epi16(dst, mask, _mm512_maskz_cvtepi32_epi16(kAll, r));
}

// Stores 32 floats (lo, then hi; those of m0 and m1) as store_bf16 does, by AVX512_BF16's
// VCVTNE2PS2BF16: the same rounding and quiet NaN, but subnormal inputs taken as zero, so a pair
// with any subnormal lane goes through store_bf16. (One instruction for 32 values instead of
// about ten per 16: the forward and dgrad tiles end in this store.)
H2_AVX512_BF16 inline void store_bf16_pair(uint16_t* dst, __m512 lo, __m512 hi, __mmask16 m0,
                                           __mmask16 m1) {
  constexpr int kSubnormal = 0x20;  // VFPCLASSPS category
  if ((_mm512_fpclass_ps_mask(lo, kSubnormal) | _mm512_fpclass_ps_mask(hi, kSubnormal)) != 0) {
    store_bf16(dst, lo, m0);
    store_bf16(dst + 16, hi, m1);
    return;
  }
  const __mmask32 mask = __mmask32(m0) | (__mmask32(m1) << 16);
  _mm512_mask_storeu_epi16(dst, mask, __m512i(_mm512_cvtne2ps_pbh(hi, lo)));
}

// Promotion of row r's sums of K block j (t0: columns 0-15, t1: 16-31): c + (s_a s_b) T, the
// first block's c being 0 (the same FMA with a zero addend, so that a zero keeps its sign as
// before) or beta * out; the last block's result goes out.
H2_AVX512_BF16 inline void promote_row(const Geometry& g, int64_t j, int r, __m512 t0, __m512 t1,
                                       const float* sa, const float* sb, float* c,
                                       const TileOut& out) {
  const __mmask16 m0 = out.w >= 16 ? 0xffff : __mmask16((1u << out.w) - 1);
  const __mmask16 m1 = out.w >= 32 ? 0xffff : out.w <= 16 ? 0 : __mmask16((1u << (out.w - 16)) - 1);
  const __m512 sb0 = _mm512_loadu_ps(sb + j * g.P * kNR);
  const __m512 sb1 = _mm512_loadu_ps(sb + j * g.P * kNR + 16);
  const bool from_c = j > 0, from_out = j == 0 && out.beta != 0, last = j == g.J - 1;
  const __m512 s = _mm512_set1_ps(sa[r * g.J + j]);
  float* cr = c + r * kNR;
  const __m512 c0 = _mm512_fmadd_ps(_mm512_mul_ps(s, sb0), t0,
                                    from_c     ? _mm512_loadu_ps(cr)
                                    : from_out ? scaled_out(out, r, 0, m0)
                                               : _mm512_setzero_ps());
  const __m512 c1 = _mm512_fmadd_ps(_mm512_mul_ps(s, sb1), t1,
                                    from_c     ? _mm512_loadu_ps(cr + 16)
                                    : from_out ? scaled_out(out, r, 1, m1)
                                               : _mm512_setzero_ps());
  if (!last) {
    _mm512_storeu_ps(cr, c0);
    _mm512_storeu_ps(cr + 16, c1);
  } else if (out.f32 != nullptr) {
    _mm512_mask_storeu_ps(out.f32 + r * out.ld, m0, c0);
    _mm512_mask_storeu_ps(out.f32 + r * out.ld + 16, m1, c1);
  } else {
    store_bf16_pair(out.bf16 + r * out.ld, c0, c1, m0, m1);
  }
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

// AMX: an out tile of up to 16 rows, each K block's products summed by the tile unit (TDPBF16PS:
// 16 x 32 of a against 16 pairs x 32 columns of b per step, tmm0/tmm1 the two 16-column halves of
// T, tmm2 a's rows, tmm3/tmm4 b's halves, which the pair layout of a panel holds 128 bytes
// apart), stored to T in L1 and promoted from there as by `tile`. A block's steps run past its
// last pair into zeros: a's rows and b's panels are padded with them to Ks, a multiple of 32.
// Rows of `a` past `rows` are read and their sums dropped.
#define H2_AMX [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16")]]
constexpr int64_t kAmxRows = 16;  // rows of an out tile on the AMX path: one tile of a

// Whether the tiles take K blocks kb wide: AMX-BF16 (H2_CPU_MAX_ISA leaving it), steps of 32.
bool amx_takes(int64_t kb) {
  return cpu_has(CpuFeature::amx_bf16) && kb % 32 == 0;
}
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64};  // bytes per row: 16 floats or 32 bf16
  uint8_t rows[16] = {16, 16, 16, 16, 16};
};

H2_AMX void tile_amx(const Geometry& g, int rows, const uint16_t* a, int64_t lda,
                     const uint16_t* panel, const float* sa, const float* sb, float* c,
                     const TileOut& out) {
  // GCC 12's tile loads are asm statements without a memory operand: this keeps the stores that
  // filled a's tile and b's panels before them.
  asm volatile("" ::: "memory");
  alignas(64) float t[kAmxRows * kNR];
  for (int64_t j = 0; j < g.J; ++j) {
    const int64_t pairs = (std::min(g.kb, g.K - j * g.kb) + 1) / 2;
    const uint16_t* bj = panel + j * (g.kb / 2) * kNR * 2;
    const uint16_t* aj = a + j * g.kb;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t q = 0; q < pairs; q += 16) {
      _tile_loadd(2, aj + 2 * q, lda * int64_t(sizeof(uint16_t)));
      _tile_loadd(3, bj + q * kNR * 2, kNR * 2 * int64_t(sizeof(uint16_t)));
      _tile_loadd(4, bj + q * kNR * 2 + 32, kNR * 2 * int64_t(sizeof(uint16_t)));
      _tile_dpbf16ps(0, 2, 3);
      _tile_dpbf16ps(1, 2, 4);
    }
    _tile_stored(0, t, kNR * int64_t(sizeof(float)));
    _tile_stored(1, t + 16, kNR * int64_t(sizeof(float)));
    for (int r = 0; r < rows; ++r)
      promote_row(g, j, r, _mm512_load_ps(t + r * kNR), _mm512_load_ps(t + r * kNR + 16), sa, sb, c,
                  out);
  }
}

// The configuration is a constant in memory: built on the stack, GCC 12 kept only its first 32
// bytes for LDTILECFG, whose asm operand it takes to be shorter, and the rows faulted.
H2_AMX void load_amx_config() {
  static constexpr AmxTileConfig kConfig{};
  _tile_loadconfig(&kConfig);
}
H2_AMX void release_amx() {
  _tile_release();
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

// Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// which it grants a whole process, once (oneDNN asks too): false where it refuses. The answer is
// the process's, so it is asked once.
bool request_amx_state() {
  static const bool granted = [] {
    constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
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
  // The route is chosen once per device (h2_kblock_gemm_from_env checks it); this guards a
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

  ScratchBuffer<uint16_t> packed(stream, size_t(g.P * g.Ks * kNR));
  pack_b(b, g, packed.data());
  ScratchBuffer<float> sb(stream, size_t(g.J * g.P * kNR));
  for (int64_t j = 0; j < g.J; ++j)
    for (int64_t n = 0; n < g.P * kNR; ++n)
      sb.data()[j * g.P * kNR + n] = n < g.N ? b.scale(n / b.block_rows(), j) : 0.0f;

  const bool f32_out = args.out.dtype() == DType::f32;
  H2_CHECK(f32_out || args.out.dtype() == DType::bf16,
           "cpu qmatmul: kblock_gemm writes f32 or bf16, not {}", dtype_name(args.out.dtype()));
  const size_t out_bytes = f32_out ? sizeof(float) : sizeof(uint16_t);
  // Prefetches the `rows` rows of out that the tile at (i0, n0) starts from (beta != 0), while
  // the tile before it computes: read cold by the tile's first promotion, they were half of the
  // time outside the tiles.
  auto prefetch_out = [&](int64_t i0, int64_t n0, int64_t rows) {
    const char* at = static_cast<const char*>(args.out.data()) + size_t(i0 * g.N + n0) * out_bytes;
    for (int64_t r = 0; r < rows; ++r)
      for (size_t b = 0; b < size_t(kNR) * out_bytes; b += 64)
        __builtin_prefetch(at + size_t(r * g.N) * out_bytes + b);
  };
  // Threads take equal runs of rows, tiled from their first: whole tiles from row 0 gave the
  // first thread 132 of a weight gradient's 256 rows (11 tiles against 10 and one of 4 rows).
  parallel_for(g.M, g.N * g.K, [&](int64_t r0, int64_t r1) {
    // This thread's decoded tile of a (tile_rows x Ks, 64-byte rows for AMX's loads; AMX reads
    // all 16 rows of a short tile: zeros, or the rows of the thread's tile before) and its rows'
    // scales (tile_rows x J, alpha folded in).
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
      for (int64_t p = 0; p < g.P; ++p) {
        const int64_t n0 = p * kNR, at = i0 * g.N + n0;
        const TileOut out{.f32 = f32_out ? args.out.data_as<float>() + at : nullptr,
                          .bf16 = f32_out ? nullptr : &args.out.data_as<bf16_t>()[at].bits,
                          .ld = g.N,
                          .w = std::min(kNR, g.N - n0),
                          .beta = args.beta};
        if (args.beta != 0) {  // the next tile's rows of out: the next panel, or the next rows'
          if (p + 1 < g.P) {
            prefetch_out(i0, n0 + kNR, rows);
          } else if (i0 + tile_rows < r1) {
            prefetch_out(i0 + tile_rows, 0, std::min<int64_t>(tile_rows, r1 - i0 - tile_rows));
          }
        }
        const uint16_t* panel = packed.data() + p * g.Ks * kNR;
        if (amx) {
          tile_amx(g, int(rows), a16.get(), g.Ks, panel, sa.get(), sb.data() + n0, c, out);
        } else {
          kTiles[size_t(rows - 1)](g, a16.get(), g.Ks, panel, sa.get(), sb.data() + n0, c, out);
        }
      }
    }
    if (amx) release_amx();
  });
}

}  // namespace h2::cpu
