// fp8_blockwise's K-block GEMM on AMX's tile unit (kblock_tiles.h; the algorithm is
// kblock_gemm.cpp's).
//
// Shapes: an out tile is 32 x 32 (kAmxRows x kNR): tmm0-tmm3 hold its four 16 x 16 quarters, tmm4
// and tmm5 a's two 16-row tiles (16 x 32 bf16), tmm6 and tmm7 b's two 16-column halves of 16
// pairs (the pair layout of a panel holds them 128 bytes apart). Four TDPBF16PS per step of 16
// pairs of K; a 32-row tile loads each of b's halves once for both of a's tiles, which halved
// the panels' traffic from L2 against a 16-row tile.
//
// Algorithm. For each tile of a's rows, for each panel of b, for each K block: the block's sums go
// from the tiles to T in L1, the tile unit starts on the next block (the next panel's first after
// a panel's last; its first step waits for the stores), and while it runs the vector units
// promote the blocks stored, two at a time (c read and written once for both, and not at all
// where K is two blocks, as in the forward GEMMs). In a K-block-by-block loop that waited for each
// promotion, the promotions took as long as the tile unit. A block's steps run past its last
// pair into zeros: a's rows and b's panels are padded with them to Ks, a multiple of 32. The tile
// unit orders a block's sums its own way: this path and the AVX-512 one differ in the last bits,
// as the oneDNN route does.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/kernels/kblock_tiles.h"
#include "core/cpu_features.h"

namespace h2::cpu::kblock {
namespace {

#define H2_AMX [[gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16")]]

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};  // bytes per row: 16 floats or 32 bf16
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// Block j's sums of an out tile: rows 0-15 into tmm0 (columns 0-15) and tmm1 (16-31), rows 16-31
// (kHalves 2) into tmm2 and tmm3; a's two 16-row tiles in tmm4 and tmm5, b's halves in tmm6 and
// tmm7. (GCC 12's tile intrinsics take their tile numbers as literal tokens.)
template <int kHalves>
H2_AMX inline void sum_block_amx(const Geometry& g, int64_t j, const uint16_t* a, int64_t lda,
                                 const uint16_t* panel) {
  const int64_t pairs = (std::min(g.kb, g.K - j * g.kb) + 1) / 2;
  const uint16_t* bj = panel + j * (g.kb / 2) * kNR * 2;
  const uint16_t* aj = a + j * g.kb;
  const int64_t a_stride = lda * int64_t(sizeof(uint16_t)), b_stride = kNR * 2 * sizeof(uint16_t);
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kHalves == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t q = 0; q < pairs; q += 16) {
    _tile_loadd(6, bj + q * kNR * 2, b_stride);
    _tile_loadd(7, bj + q * kNR * 2 + 32, b_stride);
    _tile_loadd(4, aj + 2 * q, a_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (kHalves == 2) {
      _tile_loadd(5, aj + 16 * lda + 2 * q, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}
// The tile's sums T (16 kHalves x 32 floats) from the tiles sum_block_amx filled into t.
template <int kHalves>
H2_AMX inline void store_block_amx(float* t) {
  constexpr int64_t kStride = kNR * int64_t(sizeof(float));
  _tile_stored(0, t, kStride);
  _tile_stored(1, t + 16, kStride);
  if constexpr (kHalves == 2) {
    _tile_stored(2, t + 16 * kNR, kStride);
    _tile_stored(3, t + 16 * kNR + 16, kStride);
  }
}

// Rows [0, rows) of the sums of blocks j to j + n - 1 (n: 1 or 2; block j + i's T in t[i], rows x
// kNR floats in L1) promoted, c read and written once for both. kUniform: b's scales are the
// same across the panel (blocks of b taller than kNR rows, such as 128 x 128 weight blocks),
// so that a row's scale is one product of two numbers, the same one that each lane's product
// makes otherwise.
template <bool kUniform>
H2_AVX512_BF16 void promote_rows(const Geometry& g, int64_t j, int n, int rows,
                                 const float* const* t, const float* sa, const float* sb, float* c,
                                 const TileOut& out) {
  const OutColumns m(out);
  __m512 sb_half[2][2];
  float sb_panel[2];
  for (int i = 0; i < n; ++i) {
    const float* sbj = sb + (j + i) * g.P * kNR;
    sb_half[i][0] = _mm512_loadu_ps(sbj);
    sb_half[i][1] = _mm512_loadu_ps(sbj + 16);
    sb_panel[i] = sbj[0];
  }
  for (int r = 0; r < rows; ++r) {
    RowSums sums = promotion_start(j, r, c, out, m);
    for (int i = 0; i < n; ++i) {
      const float s_a = sa[r * g.J + j + i];
      const __m512 s0 = kUniform ? _mm512_set1_ps(s_a * sb_panel[i])
                                 : _mm512_mul_ps(_mm512_set1_ps(s_a), sb_half[i][0]);
      const __m512 s1 = kUniform ? s0 : _mm512_mul_ps(_mm512_set1_ps(s_a), sb_half[i][1]);
      sums.c0 = _mm512_fmadd_ps(s0, _mm512_load_ps(t[i] + r * kNR), sums.c0);
      sums.c1 = _mm512_fmadd_ps(s1, _mm512_load_ps(t[i] + r * kNR + 16), sums.c1);
    }
    promotion_end(j + n == g.J, r, sums, c, out, m);
  }
}

// The out tiles of one tile of a's rows (`rows` of them, at most 16 kHalves) across every panel
// of b: each K block's sums go to L1, then the tile unit starts on the next block (the next
// panel's first after a panel's last; its first step waits for the stores) while the blocks
// stored are promoted, two at a time.
template <int kHalves, bool kUniform>
H2_AMX void row_of_tiles(const Geometry& g, int rows, const uint16_t* a, int64_t lda,
                         const uint16_t* packed, const float* sa, const float* sb, float* c,
                         const PanelOuts& outs) {
  // GCC 12's tile loads are asm statements without a memory operand: this keeps the stores that
  // filled a's tile and b's panels before them.
  asm volatile("" ::: "memory");
  alignas(64) float t[2][kAmxRows * kNR];
  const float* const both[2] = {t[0], t[1]};
  const int64_t panel_size = g.Ks * kNR;
  sum_block_amx<kHalves>(g, 0, a, lda, packed);
  for (int64_t p = 0; p < g.P; ++p) {
    const TileOut out = outs(p);
    for (int64_t j = 0; j < g.J; ++j) {
      // The tile stores are asm statements without a memory operand too: the barriers keep them
      // after the promotion that last read t and before the one that reads what they store.
      asm volatile("" ::: "memory");
      store_block_amx<kHalves>(t[j % 2]);
      if (j + 1 < g.J) {
        sum_block_amx<kHalves>(g, j + 1, a, lda, packed + p * panel_size);
      } else if (p + 1 < g.P) {
        sum_block_amx<kHalves>(g, 0, a, lda, packed + (p + 1) * panel_size);
      }
      asm volatile("" ::: "memory");
      if (j % 2 == 1 || j == g.J - 1)
        promote_rows<kUniform>(g, j - j % 2, int(j % 2 + 1), rows, both, sa, sb + p * kNR, c, out);
    }
  }
}

}  // namespace

bool amx_takes(int64_t kb) {
  return cpu_has(CpuFeature::amx_bf16) && kb % 32 == 0;
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

// The configuration is a constant in memory: built on the stack, GCC 12 kept only its first 32
// bytes for LDTILECFG, whose asm operand it takes to be shorter, and the rows faulted.
H2_AMX void load_amx_config() {
  static constexpr AmxTileConfig kConfig{};
  _tile_loadconfig(&kConfig);
}
H2_AMX void release_amx() {
  _tile_release();
}

void amx_row_of_tiles(const Geometry& g, int rows, bool uniform, const uint16_t* a, int64_t lda,
                      const uint16_t* packed, const float* sa, const float* sb, float* c,
                      const PanelOuts& outs) {
  if (rows > 16) {
    (uniform ? row_of_tiles<2, true> : row_of_tiles<2, false>)(g, rows, a, lda, packed, sa, sb, c,
                                                               outs);
  } else {
    (uniform ? row_of_tiles<1, true> : row_of_tiles<1, false>)(g, rows, a, lda, packed, sa, sb, c,
                                                               outs);
  }
}

}  // namespace h2::cpu::kblock
