// Conformance cases of the low-precision ops on every device that stores FP8/FP4 codes (others
// skip): quantize's scales and rounding error from their definitions, and qmatmul against a
// double GEMM of the dequantized operands. The detailed, hand-computed cases are in
// quantize_test.cpp and qmatmul_test.cpp.
#include <cmath>

#include "core/lowp/quant_spec.h"
#include "core/ops.h"
#include "tests/ops/conformance.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::Format;
using lowp::QuantSpec;
using lowp::ScaleRule;

// MXFP8 with the round-up scale: no element saturates, so each dequantized value is within half
// a grid step of the input (relative 2^-4 in the normal range, 2^-10 * s among subnormals), and
// each scale is the smallest power of two with amax / s <= 448.
TEST_P(OpConformance, quantize_mxfp8_ceil) {
  H2_REQUIRE(Op::quantize, DType::f8e4m3);
  if (dt() == DType::f16 || !dev().props().dtypes.contains(dt()))
    GTEST_SKIP() << "quantize reads f32 or bf16 that the device stores";
  const int64_t R = 5, K = 96;
  const QuantSpec spec{.element = Format::e4m3, .rule = ScaleRule::e8m0_ceil, .block_cols = 32};
  std::vector<float> x = rand(R * K, -3, 3);
  lowp::QTensor q = lowp::QTensor::empty(spec, R, K, dev());
  ops::quantize({.q = q, .in = upload(x, {R, K})});
  const HostQ h = to_host(q);
  const std::vector<double> deq = dequantize(h);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < K / 32; ++c) {
      double amax = 0;
      for (int64_t k = c * 32; k < c * 32 + 32; ++k)
        amax = std::max(amax, std::fabs(double(x[size_t(r * K + k)])));
      const double s = scale_at(h, r, c * 32);
      EXPECT_LE(amax / s, 448.0) << context() << " block (" << r << ", " << c << ")";
      EXPECT_GT(amax / (s / 2), 448.0) << context() << " block (" << r << ", " << c << ")";
      for (int64_t k = c * 32; k < c * 32 + 32; ++k) {
        const size_t i = size_t(r * K + k);
        const double allowed = std::ldexp(std::fabs(double(x[i])), -4) + std::ldexp(s, -10);
        EXPECT_LE(std::fabs(deq[i] - x[i]), allowed) << context() << " element " << i;
      }
    }
}

// NVFP4 activations against DeepSeek-style 128 x 128 FP8 weights, out in the target dtype.
TEST_P(OpConformance, qmatmul_nvfp4_by_blockwise) {
  H2_REQUIRE(Op::qmatmul, DType::f4e2m1);
  H2_REQUIRE(Op::quantize, DType::f8e4m3);
  if (dt() == DType::f16 || !dev().props().dtypes.contains(dt()))
    GTEST_SKIP() << "qmatmul writes f32 or bf16 that the device stores";
  const int64_t M = 19, N = 21, K = 160;
  const QuantSpec sa{
      .element = Format::e2m1, .rule = ScaleRule::nvfp4, .block_rows = 1, .block_cols = 16};
  const QuantSpec sb{
      .element = Format::e4m3, .rule = ScaleRule::f32_amax, .block_rows = 128, .block_cols = 128};
  lowp::QTensor a = quantize_values(dev(), rand(M * K), M, K, sa);
  lowp::QTensor b = quantize_values(dev(), rand(N * K), N, K, sb);
  Tensor out = nans({M, N}, dt());
  ops::qmatmul({.out = out, .a = a, .b = b});
  RefGemm ref = reference_gemm(dequantize(to_host(a)), dequantize(to_host(b)), {}, M, N, K, 1, 0);
  expect_close("out", out, ref.out);
}

// Dequantize of every scale rule equals the definition (decode(code) * block scale), written in
// the target dtype: MXFP4 rows of 64 with 1 x 32 blocks, and 128 x 128-block FP8.
TEST_P(OpConformance, dequantize_every_rule) {
  H2_REQUIRE(Op::dequantize, DType::f4e2m1);
  H2_REQUIRE(Op::dequantize, DType::f8e4m3);
  if (!dev().props().dtypes.contains(dt()))
    GTEST_SKIP() << "the device does not store " << dtype_name(dt());
  const int64_t R = 7, K = 160;
  for (const QuantSpec& s : {spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32),
                             spec(Format::e2m1, ScaleRule::nvfp4, 1, 16),
                             spec(Format::e4m3, ScaleRule::f32_amax, 128, 128),
                             spec(Format::e5m2, ScaleRule::e8m0_ceil, 1, 32)}) {
    lowp::QTensor q = quantize_values(dev(), rand(R * K, -5, 5), R, K, s);
    Tensor out = nans({R, K}, dt());
    ops::dequantize({.out = out, .q = q});
    expect_close("out", out, dequantize(to_host(q)));
  }
}

}  // namespace
}  // namespace h2::test
