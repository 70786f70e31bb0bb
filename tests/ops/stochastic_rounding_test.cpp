// Stochastic rounding through the quantize op on each route a training step takes for its
// gradients: FP32 and bf16 inputs, as they lie and transposed (dy and dy^T), the FP4 recipes'
// block rules (MXFP4's E8M0 1 x 32, NVFP4's 1 x 16) and FP32-scaled E4M3, on a matrix large
// enough for the quantizer's panels and strips. Each must be unbiased (the mean of the dequantized
// values is the input's) and draw independently per element: every row's and every column's
// share of values rounded up is the rounding probability p (a draw shared along a row or a column
// would make those shares 0 or 1), and neighbours along rows and along columns both round up with
// probability p^2 (a draw shared by a vector's lanes would make it p).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/lowp/formats.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::Format;
using lowp::QuantSpec;
using lowp::ScaleRule;

constexpr int64_t kRows = 256, kCols = 512;
// Every element is the case's value but one in each run of 16 along a row, 1.0: each block's
// amax is 1, so the scales are MXFP4's 1/4, NVFP4's 1/6 and E4M3's 1/448. The values are exact in
// bf16 and lie between two grid points: 19/64 between normal numbers of each format (MXFP4 1.1875,
// NVFP4 1.78125, E4M3 133 once scaled), 5/64 between E2M1's 0 and its subnormal 0.5 (0.3125,
// 0.46875) and between E4M3's 32 and 36 (35).
bool is_block_max(int64_t r, int64_t k) {
  return (r + k) % 16 == 0;
}

struct Case {
  std::string name;
  QuantSpec spec;
  float value;
  double lo, hi;  // the value's neighbours on the format's grid, dequantized
};

// Quantizes the (kRows x kCols) matrix above with stochastic rounding: from an input of `dtype`,
// laid out as it is or transposed (the op then reads its (kCols x kRows) transpose).
std::vector<double> quantize_stochastic(const Case& c, DType dtype, bool transpose) {
  Device& cpu = lowp_runtime().cpu();
  std::vector<float> x(size_t(kRows * kCols));
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t k = 0; k < kCols; ++k) {
      const size_t at = size_t(transpose ? k * kRows + r : r * kCols + k);
      x[at] = is_block_max(r, k) ? 1.0f : c.value;
    }
  const Shape shape = transpose ? Shape{kCols, kRows} : Shape{kRows, kCols};
  Tensor in = tensor_from_floats(x, shape, dtype, cpu);
  lowp::QTensor q = lowp::QTensor::empty(c.spec, kRows, kCols, cpu);
  ops::quantize(
      {.q = q, .in = in, .transpose = transpose, .stochastic = true, .seed = 11, .first_index = 0});
  return dequantize(to_host(q));
}

TEST(StochasticRounding, UnbiasedAndDrawnPerElementOnEveryQuantizerRoute) {
  const QuantSpec mxfp4 = spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32);
  const QuantSpec nvfp4 = spec(Format::e2m1, ScaleRule::nvfp4, 1, 16);
  const QuantSpec e4m3 = spec(Format::e4m3, ScaleRule::f32_amax, 1, 128);
  const float normal = 19.0f / 64, small = 5.0f / 64;
  const std::vector<Case> cases = {{"mxfp4", mxfp4, normal, 1.0 / 4, 1.5 / 4},
                                   {"mxfp4 subnormal", mxfp4, small, 0.0, 0.5 / 4},
                                   {"nvfp4", nvfp4, normal, 1.5 / 6, 2.0 / 6},
                                   {"nvfp4 subnormal", nvfp4, small, 0.0, 0.5 / 6},
                                   {"e4m3 1x128", e4m3, normal, 128.0 / 448, 144.0 / 448},
                                   {"e4m3 1x128 small", e4m3, small, 32.0 / 448, 36.0 / 448}};
  for (const Case& c : cases)
    for (DType dtype : {DType::f32, DType::bf16})
      for (bool transpose : {false, true}) {
        SCOPED_TRACE(c.name + " from " + std::string(dtype_name(dtype)) +
                     (transpose ? ", transposed" : ""));
        const std::vector<double> deq = quantize_stochastic(c, dtype, transpose);
        const double p = (c.value - c.lo) / (c.hi - c.lo);  // the probability of rounding up
        auto rounded_up = [&](int64_t r, int64_t k) {
          return std::fabs(deq[size_t(r * kCols + k)] - c.hi) <= 1e-6 * c.hi;
        };
        std::vector<double> row_up(kRows, 0), col_up(kCols, 0), row_n(kRows, 0), col_n(kCols, 0);
        double sum = 0, n = 0, pairs = 0, pairs_up = 0;
        bool on_grid = true;
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t k = 0; k < kCols; ++k) {
            if (is_block_max(r, k)) continue;
            const double v = deq[size_t(r * kCols + k)];
            const bool up = rounded_up(r, k);
            on_grid = on_grid && (up || std::fabs(v - c.lo) <= 1e-6 * c.lo);  // (0 exactly)
            sum += v, n += 1;
            row_up[size_t(r)] += up, row_n[size_t(r)] += 1;
            col_up[size_t(k)] += up, col_n[size_t(k)] += 1;
            for (auto [r2, k2] : {std::pair{r, k + 1}, std::pair{r + 1, k}})
              if (r2 < kRows && k2 < kCols && !is_block_max(r2, k2))
                pairs += 1, pairs_up += up && rounded_up(r2, k2);
          }
        ASSERT_TRUE(on_grid) << "a value rounded to neither neighbour";
        // About 230,000 pairs: the share's standard error is below 1e-3.
        EXPECT_NEAR(pairs_up / pairs, p * p, 0.01) << "neighbours rounded up together";
        // The mean's standard error is at most 1.7e-4 (n = 122,880): 1e-3 is six of them;
        // rounding to nearest would be off by 0.002 (E4M3, small) to 0.047 (MXFP4).
        EXPECT_NEAR(sum / n, c.value, 1e-3);
        // Shares per row (480 values) and column (240): standard errors 0.023 and 0.032.
        for (int64_t r = 0; r < kRows; ++r)
          ASSERT_NEAR(row_up[size_t(r)] / row_n[size_t(r)], p, 0.2) << "row " << r;
        for (int64_t k = 0; k < kCols; ++k)
          ASSERT_NEAR(col_up[size_t(k)] / col_n[size_t(k)], p, 0.2) << "column " << k;
      }
}

}  // namespace
}  // namespace h2::test
