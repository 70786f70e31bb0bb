// CPU quantize: codes, block scales (and the nvfp4 global) of a matrix per q.spec; the scale
// rules are defined in core/lowp/quant_spec.h and computed by core/lowp/block_scale.h.
//
// Shapes: the quantized matrix is (R, K), K-contiguous; `in` is (R, K), or (K, R) with
// transpose. br x bc: block extents (0 in the spec = the whole dimension); GR x GC: the scale grid
// (ceil(R / br), ceil(K / bc)); P = 32: rows per panel.
//
// Algorithm. A transposed f32 or bf16 input is encoded from its own rows in strips, the codes
// transposed as bytes afterwards (encode_strips; E2M1's nibble pairs regrouped first; nvfp4's
// multipliers laid out by column block so that a strip row reads its own in place), except for
// amax blocks taller than a strip (encodes_strips says why). Otherwise the matrix is read in
// panels of P rows: f32 and bf16 rows in place (bf16 amaxes on the bit patterns, values widened
// by the encoder), f16 rows widened, and a transposed f16 input gathered by 8 x 8 register tiles
// (transpose.h) into a P x K FP32 scratch whose row stride avoids multiples of 4 KiB. Threads take
// contiguous runs of panels. Per row:
//   fused (1 x bc blocks, f32_amax or e8m0_*; or an imposed multiplier): each segment's amax and
//     block scale while the row is in L1, then the encode: one pass over the input;
//   two passes (taller blocks, nvfp4): pass 1 stores each row's amax per column block
//     (R x GC floats, or column-laid; bf16 rows on their bit patterns in place, and a transposed
//     input reduced along its own contiguous rows instead of gathered), which reduce to the block
//     amaxes (and for nvfp4 the tensor amax and s_enc) and to every block's scale, in parallel;
//     pass 2 encodes the rows.
// Rows are encoded by lowp::encode_scaled_n / encode_scaled_stochastic_n, each value times its
// block's multiplier (the FP32 product x * m) as it is encoded; a panel of rows in place in one
// call. The stochastic index of (r, k) is first_index + r * K + k, so results do not depend on the
// thread split. Stats: the input's amax (NaN ignored) and the codec's count of saturated (or
// overflowed) elements.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/element.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/quantize_rows.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/kernels/transpose.h"
#include "core/error.h"
#include "core/lowp/block_scale.h"
#include "core/lowp/block_scales.h"
#include "core/lowp/quant_check.h"

namespace h2::cpu {
namespace {

using lowp::BlockScale;
using lowp::Format;
using lowp::ScaleRule;
using namespace quantize_detail;

class Quantizer {
 public:
  explicit Quantizer(const QuantizeArgs& args) : args_(args), q_(args.q) {
    const char* op = "quantize";
    lowp::check_qtensor(q_, op, "q");
    H2_CHECK(args.in.defined() && args.in.rank() == 2, "cpu quantize: in must be a matrix, got {}",
             args.in.str());
    check_float(args.in, op, "in");
    g_.R = q_.rows();
    g_.K = q_.cols();
    const int64_t in_rows = args.transpose ? g_.K : g_.R;
    const int64_t in_cols = args.transpose ? g_.R : g_.K;
    H2_CHECK(args.in.size(0) == in_rows && args.in.size(1) == in_cols,
             "cpu quantize: in {} does not give codes {}{}", args.in.shape().str(),
             q_.codes.shape().str(), args.transpose ? " when transposed" : "");
    H2_CHECK(!args.stats.defined() || (args.stats.dtype() == DType::f32 && args.stats.numel() == 2),
             "cpu quantize: stats must be 2 f32 elements, got {}", args.stats.str());
    g_.br = lowp::block_extent(q_.spec.block_rows, g_.R);
    g_.bc = lowp::block_extent(q_.spec.block_cols, g_.K);
    g_.GR = q_.scales.size(0);
    g_.GC = q_.scales.size(1);
    g_.ld = (g_.K + 15) / 16 * 16 + 16;
    if (args.multiplier > 0) {
      H2_CHECK(q_.spec.rule == ScaleRule::f32_amax && lowp::is_per_tensor(q_.spec, g_.R, g_.K),
               "cpu quantize: an imposed multiplier needs a per-tensor f32_amax spec, not {}",
               lowp::describe(q_.spec));
      H2_CHECK(std::isfinite(args.multiplier), "cpu quantize: multiplier {} is not finite",
               args.multiplier);
    }
    info_ = &lowp::format_info(q_.spec.element);
  }

  void run(Stream& stream) {
    lowp::EncodeStats stats;
    if (g_.R > 0 && g_.K > 0) {
      visit_float_dtype(args_.in.dtype(), "quantize", [&](auto tag) {
        using T = decltype(tag);
        stats = quantize<T>(static_cast<const T*>(args_.in.data()), stream);
      });
    } else if (q_.spec.rule == ScaleRule::nvfp4) {
      *q_.global.data_as<float>() = 1.0f / lowp::nvfp4_encode_scale(0);
    }
    if (args_.stats.defined()) {
      float* out = args_.stats.data_as<float>();
      out[0] = stats.amax;
      out[1] = float(stats.saturated);
    }
  }

 private:
  bool imposed() const { return args_.multiplier > 0; }
  bool fused() const { return imposed() || (g_.br == 1 && q_.spec.rule != ScaleRule::nvfp4); }

  BlockScale scale_of(float amax, float s_enc, float global) const {
    switch (q_.spec.rule) {
      case ScaleRule::f32_amax:
        return lowp::f32_amax_scale(amax, info_->max_finite);
      case ScaleRule::e8m0_floor:
        return lowp::e8m0_scale(amax, false, info_->max_finite);
      case ScaleRule::e8m0_ceil:
        return lowp::e8m0_scale(amax, true, info_->max_finite);
      case ScaleRule::nvfp4:
        return lowp::nvfp4_scale(amax, s_enc, global);
    }
    return {};
  }

  // Calls fn(part, r0, n) for every panel, parts in parallel (each with its own scratch slot).
  template <class Fn>
  void for_panels(int64_t parts, Fn&& fn) const {
    const int64_t panels = ceil_div(g_.R, kPanel);
    parallel_for(parts, ceil_div(g_.R * g_.K, parts) * 4, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t c = panels * p / parts; c < panels * (p + 1) / parts; ++c)
          fn(p, c * kPanel, std::min(kPanel, g_.R - c * kPanel));
    });
  }

  // Encodes row r (x: its K values, f32 or bf16) with one multiplier per column block (m: GC
  // values): one scaled encode, each value times its block's multiplier as it is encoded.
  template <class X>
  void encode_row(int64_t r, const X* x, const float* m, lowp::EncodeStats* stats) const {
    const int64_t first = r * g_.K;
    uint8_t* codes = codes_ + (q_.spec.element == Format::e2m1 ? first / 2 : first);
    encode_scaled(scaled_values(x, g_.K, m, g_.bc), first, 1, codes, stats);
  }

  // n values of x (f32 or bf16), value i times m[i / block].
  template <class X>
  static lowp::ScaledValues scaled_values(const X* x, int64_t n, const float* m, int64_t block) {
    static_assert(std::is_same_v<X, float> || std::is_same_v<X, bf16_t>);
    return {
        .values = x, .bf16 = std::is_same_v<X, bf16_t>, .n = n, .multipliers = m, .block = block};
  }

  // Encodes `in` into `codes`, stochastically (element i drawing at args.first_index + first +
  // i * stride) where the args ask for it.
  void encode_scaled(const lowp::ScaledValues& in, int64_t first, int64_t stride, uint8_t* codes,
                     lowp::EncodeStats* stats) const {
    if (args_.stochastic) {
      lowp::encode_scaled_stochastic_n(q_.spec.element, in, args_.seed,
                                       args_.first_index + uint64_t(first), uint64_t(stride), codes,
                                       args_.overflow, stats);
    } else {
      lowp::encode_scaled_n(q_.spec.element, in, codes, args_.overflow, stats);
    }
  }

  // Whether the two-pass path lays its amaxes and multipliers out by column block (c * R + r):
  // one-row blocks (nvfp4) of a transposed input taken by the strips, which then read each strip
  // row's multipliers in place.
  template <class T>
  bool columns_laid() const {
    return !fused() && g_.br == 1 && encodes_strips<T>();
  }

  // Pass 1 of the two-pass path: every block's multiplier (GR x GC, or column-laid; scales
  // stored on the way) and the tensor's amax.
  template <class T>
  float block_multipliers(const T* in, Stream& stream, int64_t parts, float* scratch,
                          float* multiplier) {
    const bool columns = columns_laid<T>();
    ScratchBuffer<float> row_amax(stream, size_t(g_.R * g_.GC));
    if (args_.transpose) {
      transposed_segment_amax(in, g_, columns, row_amax.data());
    } else if constexpr (std::is_same_v<T, bf16_t>) {  // bf16 rows read in place
      parallel_for(g_.R, g_.K, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          segment_amaxes(in + r * g_.K, g_.K, g_.bc, row_amax.data() + r * g_.GC);
      });
    } else {
      for_panels(parts, [&](int64_t p, int64_t r0, int64_t n) {
        const Panel panel = read_panel(in, g_, false, r0, n, scratch + p * kPanel * g_.ld);
        for (int64_t i = 0; i < n; ++i)
          segment_amaxes(panel.rows + i * panel.ld, g_.K, g_.bc,
                         row_amax.data() + (r0 + i) * g_.GC);
      });
    }
    // Block amaxes: the rows' own for one-row blocks, else reduced over block rows in parallel.
    const int64_t blocks = g_.GR * g_.GC;
    ScratchBuffer<float> reduced(stream, g_.br > 1 ? size_t(blocks) : 1);
    const float* block_amax = row_amax.data();
    if (g_.br > 1) {
      std::fill_n(reduced.data(), blocks, 0.0f);
      parallel_for(g_.GR, g_.br * g_.GC, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (int64_t r = b * g_.br; r < std::min(g_.R, (b + 1) * g_.br); ++r)
            for (int64_t c = 0; c < g_.GC; ++c) {
              float& m = reduced.data()[b * g_.GC + c];
              m = std::max(m, row_amax.data()[r * g_.GC + c]);
            }
      });
      block_amax = reduced.data();
    }
    const float tensor_amax = abs_max(block_amax, blocks);  // amaxes are >= 0, never NaN
    float s_enc = 1, global = 1;
    if (q_.spec.rule == ScaleRule::nvfp4) {
      s_enc = lowp::nvfp4_encode_scale(tensor_amax);
      global = 1.0f / s_enc;
      *q_.global.data_as<float>() = global;
    }
    // Column-laid scale codes are transposed into the scales afterwards.
    ScratchBuffer<uint8_t> column_codes(stream, columns ? size_t(blocks) : 1);
    parallel_for(blocks, 16, [&](int64_t b0, int64_t b1) {
      if (q_.spec.rule == ScaleRule::nvfp4) {  // one block per 16 elements: the batch rule
        auto* codes = columns ? column_codes.data() : static_cast<uint8_t*>(scales_);
        lowp::nvfp4_scales_n(block_amax + b0, b1 - b0, s_enc, global, multiplier + b0, codes + b0);
        return;
      }
      H2_CHECK(!columns, "cpu quantize: column-laid blocks are nvfp4's only");
      for (int64_t b = b0; b < b1; ++b) {
        const BlockScale s = scale_of(block_amax[b], s_enc, global);
        multiplier[b] = s.multiplier;
        store_scale(scales_, q_.spec.rule, b, s);
      }
    });
    if (columns)  // (GC, R) codes into the (R, GC) scales
      transpose_bytes(column_codes.data(), g_.R, g_.GC, 0, g_.R, static_cast<uint8_t*>(scales_),
                      g_.GC);
    return tensor_amax;
  }

  // Whether the transposed orientation is encoded from in's own rows (encode_strips): f32 or
  // bf16 input, blocks of at most kMaxStripRows rows of in where their amax is taken here, and for
  // E2M1 strips that start on even rows of in (codes pair up along them). Two-pass one-row
  // blocks (nvfp4) lay their multipliers out by column block for it (columns_laid).
  template <class T>
  bool encodes_strips() const {
    if (!args_.transpose || std::is_same_v<T, f16_t>) return false;
    if (block_amax_in_strips() && g_.bc > kMaxStripRows) return false;
    return info_->bits == 8 || strip_grid().rows % 2 == 0 || g_.K <= strip_grid().rows;
  }

  // Whether a strip is one column block, whose amaxes it takes (the fused rules), rather than rows
  // whose multipliers are known beforehand (two-pass, imposed; strip_grid picks how many).
  bool block_amax_in_strips() const { return fused() && !imposed(); }

  // The strip path's tasks (encode_strips): strips of `rows` rows of in times col_tiles tiles of
  // kStripCols columns. A strip is one column block where its amax is taken here; otherwise (the
  // multipliers known beforehand) its height is free: it is picked for two tasks per thread where
  // in has the rows, in multiples of kStripRowStep rows up to kMaxStripRows (with strips of
  // kMaxStripRows, nvfp4's W^T of a 256 x 256 weight was one task, on one thread). The tasks do
  // not change the bits: every value is encoded with its own multiplier and stochastic index.
  struct StripGrid {
    int64_t rows, strips, col_tiles, tasks;
  };
  StripGrid strip_grid() const {
    StripGrid s{};
    s.col_tiles = ceil_div(g_.R, kStripCols);
    if (block_amax_in_strips()) {
      s.rows = g_.bc;
    } else {
      const int64_t strips_wanted = ceil_div(2 * kernel_threads(), s.col_tiles);
      const int64_t rows = ceil_div(ceil_div(g_.K, strips_wanted), kStripRowStep) * kStripRowStep;
      s.rows = std::clamp(rows, kStripRowStep, kMaxStripRows);
    }
    s.strips = ceil_div(g_.K, s.rows);
    s.tasks = s.strips * s.col_tiles;
    return s;
  }

  // The transposed orientation from in's own rows. in is (K, R), so column block c of every
  // quantized row lies in in's rows [c bc, (c + 1) bc). A task takes a strip of in's rows (one
  // column block where its amax is taken here, else strip_grid's height) and kStripCols of in's
  // columns: the fused rule's block amaxes are the strip's column maxima (a running max along in's
  // contiguous rows); each strip row is encoded as it lies, each value times its column's
  // multiplier (stochastic rounding drawing by the quantized elements' indices, K apart along in's
  // row), into a tile that is then transposed into the codes: as bytes (transpose_bytes), E2M1's
  // nibble pairs first regrouped (pair_rows). The same bits as the panel path (the same FP32
  // products x * m) without an FP32 transpose. `multiplier`: the two-pass path's per block,
  // else null.
  template <class T>
  void encode_strips(const T* in, const float* multiplier, Stream& stream,
                     std::vector<PartStats>& part_stats) {
    const int64_t R = g_.R, K = g_.K, bc = g_.bc;
    const bool columns = columns_laid<T>();
    const StripGrid grid = strip_grid();
    const int64_t rows = grid.rows, col_tiles = grid.col_tiles;
    const int64_t tasks = grid.tasks, parts = int64_t(part_stats.size());
    const bool packed = info_->bits == 4;
    const int64_t row_bytes = packed ? (K + 1) / 2 : K;  // of a quantized row
    // Per part: the encoded tile (rows x kStripCols bytes), E2M1's regrouped one (half of it),
    // and the multipliers of kStripCols columns.
    const int64_t tile_bytes = rows * kStripCols + (packed ? (rows + 1) / 2 * kStripCols : 0);
    ScratchBuffer<uint8_t> tiles(stream, size_t(parts * tile_bytes));
    ScratchBuffer<float> multipliers(stream, size_t(parts * kStripCols));
    parallel_for(parts, ceil_div(R * K, parts) * 4, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        uint8_t* tile = tiles.data() + p * tile_bytes;
        float* m = multipliers.data() + p * kStripCols;
        PartStats& st = part_stats[size_t(p)];
        for (int64_t t = tasks * p / parts; t < tasks * (p + 1) / parts; ++t) {
          const int64_t r0 = t % col_tiles * kStripCols, w = std::min(kStripCols, R - r0);
          const int64_t k0 = t / col_tiles * rows, k1 = std::min(k0 + rows, K);
          if (fused()) {  // column maxima of the strip: block amaxes (or the input's)
            // (f32 inline, not quantize_rows.h's column_magnitudes of the same form: through it
            // mxfp8's W^T measured 1.11-1.16x slower at stops 35 and 36, not found why.)
            decltype(magnitude_bits(T{})) most[kStripCols] = {}, top = 0;
            if constexpr (std::is_same_v<T, bf16_t>) {
              bf16_column_magnitudes(in + k0 * R + r0, R, k1 - k0, w, most);
            } else {
              for (int64_t k = k0; k < k1; ++k)
                for (int64_t i = 0; i < w; ++i)
                  most[i] = std::max(most[i], magnitude_bits(in[k * R + r0 + i]));
            }
            for (int64_t i = 0; i < w; ++i) {
              top = std::max(top, most[i]);
              m[i] = from_magnitude_bits(most[i]);
            }
            st.amax = std::max(st.amax, from_magnitude_bits(top));
            if (imposed()) {
              std::fill_n(m, w, args_.multiplier);
            } else {
              fused_block_scales(q_.spec.rule, info_->max_finite, m, w, m, scales_,
                                 r0 * g_.GC + k0 / bc, g_.GC);
            }
          }
          for (int64_t k = k0; k < k1; ++k) {
            const float* row_m = m;  // the multipliers of this strip row's columns
            if (columns) {
              row_m = multiplier + (k / bc) * R + r0;
            } else if (!fused() && (k == k0 || k % bc == 0)) {  // column block k / bc, gathered
              const float* block = multiplier + k / bc;
              for (int64_t i = 0; i < w; ++i) m[i] = block[((r0 + i) / g_.br) * g_.GC];
            }
            encode_scaled(scaled_values(in + k * R + r0, w, row_m, 1), r0 * K + k, K,
                          tile + (k - k0) * kStripCols, &st.codec);
          }
          uint8_t* codes = codes_ + r0 * row_bytes + k0 / (packed ? 2 : 1);
          if (!packed) {
            transpose_bytes(tile, kStripCols, k1 - k0, 0, w, codes, row_bytes);
          } else {
            uint8_t* pairs = tile + rows * kStripCols;
            const int64_t n_pairs = pair_rows(tile, k1 - k0, w, pairs);
            transpose_bytes(pairs, kStripCols, n_pairs, 0, w, codes, row_bytes);
          }
        }
      }
    });
  }

  // E2M1 tile rows (each w codes packed along it, kStripCols bytes apart) regrouped so that byte
  // i of pair row j is quantized row i's byte for tile rows 2j and 2j + 1 (low nibble first; an
  // odd last row pairs with 0, the padding nibble). Returns the number of pair rows.
  static int64_t pair_rows(const uint8_t* tile, int64_t rows, int64_t w, uint8_t* pairs) {
    const int64_t bytes = (w + 1) / 2;
    uint8_t zeros[kStripCols / 2] = {};
    for (int64_t j = 0; j < (rows + 1) / 2; ++j) {
      const uint8_t* a = tile + 2 * j * kStripCols;
      const uint8_t* b = 2 * j + 1 < rows ? a + kStripCols : zeros;
      uint8_t* out = pairs + j * kStripCols;
      for (int64_t i = 0; i < bytes; ++i) {  // codes 2i (low nibbles) and 2i + 1 (high)
        out[2 * i] = uint8_t((a[i] & 0x0f) | (b[i] << 4));
        out[2 * i + 1] = uint8_t((a[i] >> 4) | (b[i] & 0xf0));
      }
    }
    return (rows + 1) / 2;
  }

  template <class T>
  lowp::EncodeStats quantize(const T* in, Stream& stream) {
    codes_ = static_cast<uint8_t*>(q_.codes.data());
    scales_ = q_.scales.data();
    // bf16 rows are read in place (amaxes on their bit patterns, widened by the encoder); f16
    // inputs, and transposed ones the strip path does not take, through panels
    // of FP32 rows.
    const bool strips = encodes_strips<T>();
    const bool needs_scratch = (args_.transpose && !strips) || std::is_same_v<T, f16_t>;
    const int64_t parts =
        std::min<int64_t>(kernel_threads(), strips ? strip_grid().tasks : ceil_div(g_.R, kPanel));
    ScratchBuffer<float> scratch(stream, needs_scratch ? size_t(parts * kPanel * g_.ld) : 1);
    std::vector<PartStats> part_stats(static_cast<size_t>(parts));

    // The two-pass path's multipliers, per block (from the stream's allocator: a vector of this
    // size, 176 KB for nvfp4's dy^T, came from mmap and page-faulted on every call).
    ScratchBuffer<float> multiplier(stream, fused() ? 1 : size_t(g_.GR * g_.GC));
    float amax = 0;
    if (imposed()) {
      store_scale(scales_, q_.spec.rule, 0, lowp::imposed_scale(args_.multiplier));
    } else if (!fused()) {
      amax = block_multipliers(in, stream, parts, scratch.data(), multiplier.data());
    }
    if constexpr (!std::is_same_v<T, f16_t>) {
      if (strips) encode_strips(in, fused() ? nullptr : multiplier.data(), stream, part_stats);
    }
    if (!strips) encode_panels(in, multiplier.data(), stream, scratch.data(), part_stats);
    lowp::EncodeStats total;
    total.amax = amax;
    for (const PartStats& part : part_stats) {
      total.amax = std::max(total.amax, part.amax);
      total.saturated += part.codec.saturated;
    }
    return total;
  }

  // Pass 2 (or the fused path) by panels of quantized rows: the multipliers of the panel's rows
  // first (the fused rules' from each row's segment amaxes, scales stored on the way), then the
  // encode, in one call for the whole panel where its rows lie back to back (f32 and bf16 rows in
  // place) and no block straddles two rows, else row by row.
  template <class T>
  void encode_panels(const T* in, const float* multiplier, Stream& stream, float* scratch,
                     std::vector<PartStats>& part_stats) {
    constexpr bool kBf16 = std::is_same_v<T, bf16_t>;
    const auto parts = int64_t(part_stats.size());
    const int64_t GC = g_.GC;
    ScratchBuffer<float> panel_mult(stream, size_t(parts * kPanel * GC));
    const bool in_place = !args_.transpose && !std::is_same_v<T, f16_t>;
    const bool whole_panel = in_place && g_.K % g_.bc == 0;
    for_panels(parts, [&](int64_t p, int64_t r0, int64_t n) {
      Panel panel{};
      if (!kBf16 || args_.transpose)
        panel = read_panel(in, g_, args_.transpose, r0, n, scratch + p * kPanel * g_.ld);
      PartStats& st = part_stats[size_t(p)];
      float* mult = panel_mult.data() + p * kPanel * GC;  // row i's at mult + i * GC
      // fn(i, row i's values): bf16 rows in place, else the panel's FP32 rows.
      auto for_rows = [&](auto&& fn) {
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (kBf16) {
            if (!args_.transpose) {
              fn(i, in + (r0 + i) * g_.K);
              continue;
            }
          }
          fn(i, panel.rows + i * panel.ld);
        }
      };
      for_rows([&](int64_t i, const auto* x) {
        float* m = mult + i * GC;
        if (imposed()) {  // one block
          m[0] = args_.multiplier;
          st.amax = std::max(st.amax, abs_max(x, g_.K));
        } else if (fused()) {  // 1 x bc blocks: block (r, c) is segment c of this row
          segment_amaxes(x, g_.K, g_.bc, m);  // the multipliers below, for the whole panel
        } else {
          std::copy_n(multiplier + ((r0 + i) / g_.br) * GC, GC, m);
        }
      });
      if (fused() && !imposed()) {  // the panel's amaxes, rows back to back, to multipliers
        uint32_t top = 0;           // amaxes are >= 0, never NaN: their bits order as they do
        for (int64_t b = 0; b < n * GC; ++b) top = std::max(top, std::bit_cast<uint32_t>(mult[b]));
        st.amax = std::max(st.amax, std::bit_cast<float>(top));
        fused_block_scales(q_.spec.rule, info_->max_finite, mult, n * GC, mult, scales_, r0 * GC,
                           1);
      }
      if (!whole_panel) {
        for_rows(
            [&](int64_t i, const auto* x) { encode_row(r0 + i, x, mult + i * GC, &st.codec); });
        return;
      }
      const int64_t first = r0 * g_.K;
      uint8_t* codes = codes_ + (q_.spec.element == Format::e2m1 ? first / 2 : first);
      if constexpr (kBf16) {
        encode_scaled(scaled_values(in + first, n * g_.K, mult, g_.bc), first, 1, codes, &st.codec);
      } else {
        encode_scaled(scaled_values(panel.rows, n * g_.K, mult, g_.bc), first, 1, codes, &st.codec);
      }
    });
  }

  const QuantizeArgs& args_;
  const lowp::QTensor& q_;
  Geometry g_;
  const lowp::FormatInfo* info_ = nullptr;
  uint8_t* codes_ = nullptr;
  void* scales_ = nullptr;
};

}  // namespace

// q.codes (R, K), q.scales (GR, GC), q.global (1) for nvfp4 <- in (R, K) or (K, R) transposed;
// stats (2) optional.
void quantize(const QuantizeArgs& args, Stream& stream) {
  Quantizer(args).run(stream);
}

}  // namespace h2::cpu
