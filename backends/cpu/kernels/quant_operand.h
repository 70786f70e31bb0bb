// A quantized matrix (core/lowp/quant_spec.h) as the CPU kernels read it: codes, block geometry
// and each block's FP32 scale, decoded a row segment or a tile at a time into FP32 (element =
// decode(code) * its block's scale). Used by qmatmul (tiles inside the GEMM loop) and dequantize.
#pragma once

#include <algorithm>
#include <array>
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
    const float* table = lowp::decode_table(element_);
    if (element_ == Format::e2m1) {
      for (int b = 0; b < 256; ++b) pairs_[size_t(b)] = {table[b & 15], table[b >> 4]};
    } else {
      std::memcpy(table_.data(), table, sizeof(float) * 256);
    }
    if (rule_ == ScaleRule::nvfp4) global_ = *q.global.data_as<const float>();
    if (rule_ == ScaleRule::nvfp4) {
      std::memcpy(scale_table_.data(), lowp::decode_table(Format::e4m3), sizeof(float) * 256);
    } else if (rule_ != ScaleRule::f32_amax) {  // E8M0: 2^(e - 127), 0xFF = NaN
      for (uint32_t e = 0; e < 256; ++e) scale_table_[e] = lowp::codec::decode_e8m0(e);
    }
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

  // dst[j] = deq(r, k0 + j) for j < kc.
  void decode_row(int64_t r, int64_t k0, int64_t kc, float* dst) const {
    const int64_t rb = r / br_;
    for (int64_t k = k0; k < k0 + kc;) {
      const int64_t cb = k / bc_;
      const int64_t end = std::min(k0 + kc, (cb + 1) * bc_);
      const float s = scale(rb, cb);
      float* out = dst + (k - k0);
      const int64_t n = end - k;
      if (element_ == Format::e2m1) {  // k and n are even (check_spec)
        const uint8_t* c = codes_ + (r * K_ + k) / 2;
        for (int64_t j = 0; j < n / 2; ++j) {
          const std::array<float, 2>& p = pairs_[c[j]];
          out[2 * j] = p[0] * s;
          out[2 * j + 1] = p[1] * s;
        }
      } else {
        const uint8_t* c = codes_ + r * K_ + k;
        for (int64_t j = 0; j < n; ++j) out[j] = table_[c[j]] * s;
      }
      k = end;
    }
  }

  // Rows [r0, r0 + rows), columns [k0, k0 + kc) into tile (rows x kc), rows in parallel.
  void decode_tile(int64_t r0, int64_t rows, int64_t k0, int64_t kc, float* tile) const {
    parallel_for(rows, kc * 2, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) decode_row(r0 + i, k0, kc, tile + i * kc);
    });
  }

 private:
  const uint8_t* codes_;
  Format element_;
  int64_t K_, br_, bc_, GC_;
  ScaleRule rule_;
  const void* scales_;
  float global_ = 1;
  std::array<float, 256> table_{};
  std::array<std::array<float, 2>, 256> pairs_{};
  std::array<float, 256> scale_table_{};
};

}  // namespace h2::cpu
