// A quantized matrix (core/lowp/quant_spec.h) as the CPU kernels read it: codes, block geometry
// and each block's FP32 scale, decoded a row segment or a tile at a time into FP32 (element =
// decode(code) * its block's scale), or into exact bf16 values for qmatmul's bf16 routes (through
// lowp::decode_bf16_n, vectorised). Used by qmatmul and dequantize.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/cpu_parallel.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/formats.h"
#include "core/lowp/quant_spec.h"

namespace h2::cpu {

// One quantized operand, ready for decoding: codes, its block geometry and the FP32 scale of each
// block.
class QuantOperand {
  using Format = lowp::Format;
  using ScaleRule = lowp::ScaleRule;

 public:
  explicit QuantOperand(const lowp::QTensor& q)
      : codes_(static_cast<const uint8_t*>(q.codes.data())),
        element_(q.spec.element),
        K_(q.cols()),
        br_(lowp::block_extent(q.spec.block_rows, q.rows())),
        bc_(lowp::block_extent(q.spec.block_cols, q.cols())),
        GC_(q.scales.size(1)),
        rule_(q.spec.rule),
        scales_(q.scales.data()) {
    if (rule_ == ScaleRule::nvfp4) global_ = *q.global.data_as<const float>();
    if (rule_ == ScaleRule::nvfp4) {
      std::memcpy(scale_table_.data(), lowp::decode_table(Format::e4m3), sizeof(float) * 256);
    } else if (rule_ != ScaleRule::f32_amax) {  // E8M0: 2^(e - 127), 0xFF = NaN
      for (uint32_t e = 0; e < 256; ++e) scale_table_[e] = lowp::codec::decode_e8m0(e);
    }
  }

  // Block (rb, cb)'s scale less bf16_factor(): 1 for a per-tensor scale, the E4M3 block scale
  // for NVFP4 (without the global), 2^e for E8M0.
  float local_scale(int64_t rb, int64_t cb) const {
    if (rule_ == ScaleRule::f32_amax) return 1.0f;
    return scale_table_[static_cast<const uint8_t*>(scales_)[rb * GC_ + cb]];
  }

  // The FP32 scale of block (rb, cb).
  float scale(int64_t rb, int64_t cb) const {
    const int64_t i = rb * GC_ + cb;
    switch (rule_) {
      case ScaleRule::f32_amax:
        return static_cast<const float*>(scales_)[i];
      case ScaleRule::nvfp4:
        return scale_table_[static_cast<const uint8_t*>(scales_)[i]] * global_;
      default:
        return scale_table_[static_cast<const uint8_t*>(scales_)[i]];
    }
  }

  // dst[j] = deq(r, k0 + j) for j < kc (k0 even for E2M1), or where `local` the local value
  // (local_scale() for the scale; the code value for FP32 scales): a first partial block alone,
  // then up to kScaleChunk whole blocks per lowp::decode_blocks_n call with their scales gathered
  // first (a call per block, for NVFP4's blocks of 16, cost more than the decoding).
  void decode_row(int64_t r, int64_t k0, int64_t kc, float* dst, bool local = false) const {
    const int64_t rb = r / br_, k1 = k0 + kc;
    auto scale_of = [&](int64_t cb) { return local ? local_scale(rb, cb) : scale(rb, cb); };
    int64_t k = k0;
    if (k % bc_ != 0) {
      const int64_t end = std::min(k1, (k / bc_ + 1) * bc_);
      lowp::decode_n(element_, row_codes(r, k), end - k, scale_of(k / bc_), dst);
      k = end;
    }
    float scales[kScaleChunk];
    while (k < k1) {
      const int64_t cb0 = k / bc_, blocks = std::min(kScaleChunk, (k1 - k + bc_ - 1) / bc_);
      for (int64_t c = 0; c < blocks; ++c) scales[c] = scale_of(cb0 + c);
      const int64_t end = std::min(k1, k + blocks * bc_);
      lowp::decode_blocks_n(element_, row_codes(r, k), end - k, bc_, scales, dst + (k - k0));
      k = end;
    }
  }

  // The exact bf16 form used by qmatmul's bf16 path: element = bf16_factor() * local(r, k), with
  // every local value a bf16 number. It exists when the block scales fold into the elements
  // without rounding: a per-tensor FP32 scale (local = the code's value, at most 4 significant
  // bits; factor = the scale), E8M0 scales (local = value * 2^e, as long as every block's 2^e
  // keeps the values normal bf16 numbers: >= 2^-100 here, or the block is all zeros, whose
  // amax of 0 gives the smallest scale, 2^-127), NVFP4 (local = E2M1 value * E4M3 scale, at most
  // 2 + 4 significant bits; factor = the global scale). Not for FP32 block scales along K
  // (fp8_blockwise): their product with a code has up to 28 significant bits.
  bool folds_to_bf16(int64_t rows) const {
    if (rule_ == ScaleRule::f32_amax) return br_ >= rows && bc_ >= K_;  // one block
    if (rule_ == ScaleRule::nvfp4) return true;
    const int64_t blocks = (rows + br_ - 1) / br_ * GC_;  // E8M0
    const auto* codes = static_cast<const uint8_t*>(scales_);
    for (int64_t i = 0; i < blocks; ++i) {
      if (codes[i] == 0xFF) return false;                                         // NaN
      if (codes[i] < 27 && !block_is_zero(i / GC_, i % GC_, rows)) return false;  // < 2^-100
    }
    return true;
  }
  float bf16_factor() const {
    if (rule_ == ScaleRule::f32_amax) return static_cast<const float*>(scales_)[0];
    return rule_ == ScaleRule::nvfp4 ? global_ : 1.0f;
  }

  // dst[k] = local(r, k) for k < K, as bf16 bits (exact: see folds_to_bf16).
  void decode_row_bf16(int64_t r, uint16_t* dst) const {
    if (rule_ == ScaleRule::f32_amax) return decode_codes_bf16_rows(r, 1, dst);  // local = code
    // The row's block scales, kScaleChunk blocks per call.
    const int64_t rb = r / br_;
    float local[kScaleChunk];
    for (int64_t cb0 = 0; cb0 < GC_; cb0 += kScaleChunk) {
      const int64_t blocks = std::min(kScaleChunk, GC_ - cb0);
      for (int64_t c = 0; c < blocks; ++c) local[c] = local_scale(rb, cb0 + c);
      const int64_t k0 = cb0 * bc_;
      lowp::decode_bf16_n(element_, row_codes(r, k0), std::min(blocks * bc_, K_ - k0), bc_, local,
                          dst + k0);
    }
  }

  // Rows [r0, r0 + rows) as decode_row_bf16 gives them, row-major (rows x K): where blocks do not
  // straddle rows, several rows per decode call, their block scales gathered first (a call per
  // row cost more than decoding a short row).
  void decode_rows_bf16(int64_t r0, int64_t rows, uint16_t* dst) const {
    if (rule_ == ScaleRule::f32_amax) return decode_codes_bf16_rows(r0, rows, dst);
    if (K_ % bc_ != 0 || GC_ > kScaleChunk) {
      for (int64_t i = 0; i < rows; ++i) decode_row_bf16(r0 + i, dst + i * K_);
      return;
    }
    const int64_t per_call = kScaleChunk / GC_;
    float local[kScaleChunk];
    for (int64_t r = r0; r < r0 + rows; r += per_call) {
      const int64_t n = std::min(per_call, r0 + rows - r);
      local_scales_of_rows(r, n, local);
      lowp::decode_bf16_n(element_, row_codes(r, 0), n * K_, bc_, local, dst + (r - r0) * K_);
    }
  }

  // Rows [r0, r0 + rows) of code values as bf16 bits, row-major (rows x K), without any scale:
  // exact, since every E4M3, E5M2 and E2M1 value is a bf16 number; one call over the contiguous
  // codes. qmatmul's K-block path applies the FP32 block scales to each K block's product.
  void decode_codes_bf16_rows(int64_t r0, int64_t rows, uint16_t* dst) const {
    decode_codes_bf16(row_codes(r0, 0), rows * K_, dst);
  }

  // Rows [r0, r0 + rows) of code values as FP32, row-major (rows x K), without any scale (exact):
  // the FP32 K-block kernels' operands with FP32 block scales (kblock_fp32.h).
  void decode_codes_rows(int64_t r0, int64_t rows, float* dst) const {
    decode_codes(row_codes(r0, 0), rows * K_, dst);
  }

  // n consecutive codes as FP32 code values, without any scale (exact).
  void decode_codes(const uint8_t* codes, int64_t n, float* dst) const {
    lowp::decode_n(element_, codes, n, 1.0f, dst);
  }

  // n codes in any arrangement as bf16 bits, without any scale (exact): rows of codes, or the
  // K-block path's packed panels of one-byte codes, rearranged as codes first.
  void decode_codes_bf16(const uint8_t* codes, int64_t n, uint16_t* dst) const {
    lowp::decode_bf16_n(element_, codes, n, n, nullptr, dst);
  }

  // The code of element (r, k): its byte, or (k even) the byte holding E2M1 codes k and k + 1.
  const uint8_t* row_codes(int64_t r, int64_t k) const {
    const int64_t i = r * K_ + k;
    return codes_ + (element_ == Format::e2m1 ? i / 2 : i);
  }

  Format element() const { return element_; }
  ScaleRule rule() const { return rule_; }
  int64_t block_rows() const { return br_; }
  int64_t block_cols() const { return bc_; }

  // Rows [r0, r0 + rows), columns [k0, k0 + kc) into tile (rows x kc), rows in parallel.
  void decode_tile(int64_t r0, int64_t rows, int64_t k0, int64_t kc, float* tile) const {
    parallel_for(rows, kc * 2, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) decode_row(r0 + i, k0, kc, tile + i * kc);
    });
  }

 private:
  // Whether every element of block (rb, cb) of the first `rows` rows is +0 or -0.
  bool block_is_zero(int64_t rb, int64_t cb, int64_t rows) const {
    const int64_t k0 = cb * bc_, k1 = std::min(K_, k0 + bc_);
    // E2M1: k0 and k1 are even, so whole bytes of two codes, each nibble's magnitude tested.
    const bool nibbles = element_ == Format::e2m1;
    const int64_t bytes = nibbles ? (k1 - k0) / 2 : k1 - k0;
    const uint8_t magnitude = nibbles ? 0x77 : 0x7f;
    for (int64_t r = rb * br_; r < std::min(rows, (rb + 1) * br_); ++r) {
      const uint8_t* c = row_codes(r, k0);
      for (int64_t j = 0; j < bytes; ++j)
        if ((c[j] & magnitude) != 0) return false;
    }
    return true;
  }

  // local[i * GC + c] = local_scale of row r + i's block c, for i < n (n * GC <= kScaleChunk;
  // E8M0 or NVFP4). NVFP4's one-row blocks have their E4M3 scale codes back to back: decoded as
  // one batch (exact in bf16, then widened), where a lookup per block with a division per row
  // took 1% of an nvfp4 training step.
  void local_scales_of_rows(int64_t r, int64_t n, float* local) const {
    const auto* codes = static_cast<const uint8_t*>(scales_);
    if (rule_ == ScaleRule::nvfp4 && br_ == 1) {
      std::array<uint16_t, kScaleChunk> bits;
      lowp::decode_bf16_n(Format::e4m3, codes + r * GC_, n * GC_, n * GC_, nullptr, bits.data());
      for (int64_t i = 0; i < n * GC_; ++i)
        local[i] = std::bit_cast<float>(uint32_t(bits[size_t(i)]) << 16);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* row = codes + (r + i) / br_ * GC_;
      for (int64_t c = 0; c < GC_; ++c) local[i * GC_ + c] = scale_table_[row[c]];
    }
  }

  static constexpr int64_t kScaleChunk = 256;  // block scales gathered per decode call

  const uint8_t* codes_;
  Format element_;
  int64_t K_, br_, bc_, GC_;
  ScaleRule rule_;
  const void* scales_;
  float global_ = 1;
  std::array<float, 256> scale_table_{};
};

}  // namespace h2::cpu
