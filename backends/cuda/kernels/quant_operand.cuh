// A quantized matrix (core/lowp/quant_spec.h) as the CUDA kernels read it, and the dequantized
// value of one element: decode(code) * its block's scale (f32, 2^(e - 127), or
// decode_e4m3(sb) * g). Shared by qmatmul and dequantize.
#pragma once

#include <cstdint>

#include "core/lowp/format_codec.h"
#include "core/lowp/quant_spec.h"

namespace h2::cuda {

// One quantized operand as the kernel reads it.
struct QOperand {
  const uint8_t* codes;
  const void* scales;
  const float* global;  // nvfp4 only
  int64_t rows, K, br, bc, GC;
  lowp::Format element;
  lowp::ScaleRule rule;
};

inline QOperand make_operand(const lowp::QTensor& q) {
  return {
      static_cast<const uint8_t*>(q.codes.data()),
      q.scales.data(),
      q.spec.rule == lowp::ScaleRule::nvfp4 ? static_cast<const float*>(q.global.data()) : nullptr,
      q.rows(),
      q.cols(),
      lowp::block_extent(q.spec.block_rows, q.rows()),
      lowp::block_extent(q.spec.block_cols, q.cols()),
      q.scales.size(1),
      q.spec.element,
      q.spec.rule};
}

__device__ __forceinline__ float decode_code(lowp::Format f, uint32_t code) {
  switch (f) {
    case lowp::Format::e4m3:
      return lowp::codec::decode<lowp::codec::E4M3>(code);
    case lowp::Format::e5m2:
      return lowp::codec::decode<lowp::codec::E5M2>(code);
    default:
      return lowp::codec::decode<lowp::codec::E2M1>(code);
  }
}

// deq(r, k) of an operand; 0 outside it (tile padding).
__device__ inline float dequantized(const QOperand& q, int64_t r, int64_t k) {
  if (r >= q.rows || k >= q.K) return 0.0f;
  const int64_t i = r * q.K + k;
  const uint32_t code =
      q.element == lowp::Format::e2m1 ? (q.codes[i / 2] >> ((i & 1) * 4)) & 0xfu : q.codes[i];
  const int64_t s = (r / q.br) * q.GC + k / q.bc;
  float scale;
  switch (q.rule) {
    case lowp::ScaleRule::f32_amax:
      scale = static_cast<const float*>(q.scales)[s];
      break;
    case lowp::ScaleRule::nvfp4:
      scale = lowp::codec::decode<lowp::codec::E4M3>(static_cast<const uint8_t*>(q.scales)[s]) *
              *q.global;
      break;
    default:
      scale = lowp::codec::decode_e8m0(static_cast<const uint8_t*>(q.scales)[s]);
      break;
  }
  return decode_code(q.element, code) * scale;
}

}  // namespace h2::cuda
