// How a matrix is quantized (element format, block shape, scale rule) and the tensors that hold
// the result (QTensor). A quantized matrix is always stored K-contiguous: (R, K) codes where K is
// the reduction dimension of the GEMM that consumes it, so qmatmul computes deq(a) @ deq(b)^T.
//
// Scale rules (one scale per block of block_rows x block_cols elements; 0 = the whole dimension):
//   f32_amax    multiplier m = max_finite / amax_block (FP32), stored dequant scale s = 1 / m;
//               amax_block == 0 gives m = s = 1. A caller may impose the multiplier (delayed
//               per-tensor scaling, QuantizeArgs::multiplier).
//   e8m0_floor  OCP MX: s = 2^(floor(log2 amax_block) - emax_elem), emax_elem = 8 (E4M3),
//               15 (E5M2), 2 (E2M1); elements then saturate. amax_block == 0 gives s = 2^-127.
//   e8m0_ceil   round-up variant: s = the smallest power of two with amax_block / s <= max_finite
//               (no element saturates).
//   nvfp4       E2M1 elements, 1 x 16 blocks. Tensor: s_enc = 6 * 448 / amax_tensor (FP32), global
//               g = 1 / s_enc. Block: sb = e4m3(amax_block / 6 * s_enc); elements encode
//               x * (s_enc / decode(sb)) (0 when sb decodes to 0).
// Dequantized element = decode(code) * s, with s the block's FP32 scale (f32_amax), 2^(e - 127)
// (e8m0_*), or decode_e4m3(sb) * g rounded to FP32 (nvfp4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/lowp/formats.h"
#include "core/tensor.h"

namespace h2::lowp {

enum class ScaleRule : uint8_t { f32_amax, e8m0_floor, e8m0_ceil, nvfp4 };

struct QuantSpec {
  Format element = Format::e4m3;  // e4m3, e5m2 or e2m1
  ScaleRule rule = ScaleRule::f32_amax;
  int64_t block_rows = 0;  // 0: all rows of the (R, K) matrix
  int64_t block_cols = 0;  // along K; 0: all of K
  bool operator==(const QuantSpec&) const = default;
};

// The storage dtype of a format's codes (f8e4m3, f8e5m2, f4e2m1).
DType element_dtype(Format f);
// The inverse: the element format of a code dtype; nullopt for any other dtype.
std::optional<Format> element_format(DType t);
// Scale tensor dtype for a rule: f32 (f32_amax), u8 (E8M0 codes), f8e4m3 (nvfp4).
DType scale_dtype(ScaleRule rule);
// Block extent along one dimension of length n (0 in the spec means n).
inline int64_t block_extent(int64_t spec_block, int64_t n) {
  return spec_block == 0 ? n : spec_block;
}
// Scale grid of an (R, K) matrix: (ceil(R / block_rows), ceil(K / block_cols)).
Shape scale_shape(const QuantSpec& spec, int64_t rows, int64_t cols);
// "e4m3 f32_amax 1x128", for logs and errors.
std::string describe(const QuantSpec& spec);

// A quantized (R, K) matrix on one device: codes (R, K) in element_dtype(spec.element); scales in
// scale_shape(); global: one f32 element for nvfp4, undefined otherwise.
struct QTensor {
  Tensor codes;
  Tensor scales;
  Tensor global;
  QuantSpec spec;

  int64_t rows() const { return codes.size(0); }
  int64_t cols() const { return codes.size(1); }
  // Allocates the three tensors for an (R, K) matrix (codes uninitialised).
  static QTensor empty(const QuantSpec& spec, int64_t rows, int64_t cols, Device& device);
};

}  // namespace h2::lowp
