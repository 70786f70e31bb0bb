// The quantize op: each scale rule on blocks whose amax, scale byte and dequantized values are
// worked out by hand below (core/lowp/quant_spec.h has the definitions), partial edge blocks,
// transposed input, bf16 input, stochastic rounding (reproducible, seed-dependent, unbiased, and
// indexed by element position), the stats output, the imposed multiplier and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/lowp/formats.h"
#include "core/lowp/quant_check.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/cpu_kernel_threads.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::Format;
using lowp::QuantSpec;
using lowp::ScaleRule;

struct Result {
  HostQ q;
  std::vector<double> deq;
  float amax = 0;
  float saturated = 0;
};

Device& cpu() {
  return lowp_runtime().cpu();
}

Result run(const std::vector<float>& values, int64_t rows, int64_t cols, const QuantSpec& spec,
           DType in_dtype = DType::f32) {
  Tensor stats;
  lowp::QTensor q = quantize_values(cpu(), values, rows, cols, spec, in_dtype, &stats);
  Result r{to_host(q), {}, 0, 0};
  r.deq = dequantize(r.q);
  std::vector<float> s = tensor_to_floats(stats);
  r.amax = s[0];
  r.saturated = s[1];
  return r;
}

// One row of two MX blocks: block 0 amax 10 (floor(log2 10) = 3), block 1 amax 500 (floor 8).
std::vector<float> mx_row() {
  std::vector<float> x(64, 0.0f);
  x[0] = 10;
  x[1] = 0.1f;
  x[2] = -1;
  x[32] = 500;
  x[33] = 1.0625f;
  x[34] = -0.3f;
  return x;
}

TEST(Quantize, Mxfp8FloorScaleBytesAndValues) {
  Result r = run(mx_row(), 1, 64, spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32));
  // Block 0: s = 2^(3 - 8) = 2^-5, E8M0 code 127 - 5 = 122. x * 32: 320 (exact), 3.2 -> 3.25,
  // -32 (exact).
  ASSERT_EQ(r.q.scale_bytes.size(), 2u);
  EXPECT_EQ(r.q.scale_bytes[0], 122);
  EXPECT_EQ(r.deq[0], 10.0);
  EXPECT_EQ(r.deq[1], 3.25 / 32);  // 0.1015625
  EXPECT_EQ(r.deq[2], -1.0);
  EXPECT_EQ(r.deq[3], 0.0);
  // Block 1: s = 2^(8 - 8) = 1, code 127. 500 saturates to 448; 1.0625 ties to even 1.0;
  // -0.3 -> -10 * 2^-5 = -0.3125.
  EXPECT_EQ(r.q.scale_bytes[1], 127);
  EXPECT_EQ(r.deq[32], 448.0);
  EXPECT_EQ(r.deq[33], 1.0);
  EXPECT_EQ(r.deq[34], -0.3125);
  EXPECT_EQ(r.amax, 500.0f);
  EXPECT_EQ(r.saturated, 1.0f);
}

TEST(Quantize, Mxfp8CeilNeverSaturates) {
  Result r = run(mx_row(), 1, 64, spec(Format::e4m3, ScaleRule::e8m0_ceil, 1, 32));
  // Block 0: 10 = 1.25 * 2^3 and 1.25 <= 1.75 (448 = 1.75 * 2^8): s = 2^-5 as with floor.
  EXPECT_EQ(r.q.scale_bytes[0], 122);
  EXPECT_EQ(r.deq[0], 10.0);
  // Block 1: 500 = 1.953 * 2^8 > 448: s = 2^1, code 128. 250 -> 256 (step 16), 0.53125 ties to
  // even 0.5, -0.15 -> -10/64.
  EXPECT_EQ(r.q.scale_bytes[1], 128);
  EXPECT_EQ(r.deq[32], 512.0);
  EXPECT_EQ(r.deq[33], 1.0);
  EXPECT_EQ(r.deq[34], -0.3125);
  EXPECT_EQ(r.saturated, 0.0f);
}

TEST(Quantize, MxE5m2AndE2m1Exponents) {
  std::vector<float> x(32, 0.0f);
  x[0] = 10;
  Result e5 = run(x, 1, 32, spec(Format::e5m2, ScaleRule::e8m0_floor, 1, 32));
  EXPECT_EQ(e5.q.scale_bytes[0], 127 + 3 - 15);  // emax_elem 15
  EXPECT_EQ(e5.deq[0], 10.0);                    // 10 * 2^12 = 1.25 * 2^15, exact in E5M2

  // E2M1 (emax_elem 2): 10 -> s = 2^1; 10/2 = 5 ties to 4, 2.5/2 = 1.25 ties to 1, -3.5 ties to
  // -4, 0.15 -> 0.
  x[1] = 2.5f;
  x[2] = -7;
  x[3] = 0.3f;
  Result e2 = run(x, 1, 32, spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32));
  EXPECT_EQ(e2.q.scale_bytes[0], 128);
  EXPECT_EQ(e2.deq[0], 8.0);
  EXPECT_EQ(e2.deq[1], 2.0);
  EXPECT_EQ(e2.deq[2], -8.0);
  EXPECT_EQ(e2.deq[3], 0.0);

  // amax 15 = 1.875 * 2^3: floor s = 2 (15/2 = 7.5 is past the 7 that would round up to 8: it
  // saturates to 6 and counts), ceil s = 4 (3.75 -> 4).
  x[0] = 15;
  Result floor = run(x, 1, 32, spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32));
  Result ceil = run(x, 1, 32, spec(Format::e2m1, ScaleRule::e8m0_ceil, 1, 32));
  EXPECT_EQ(floor.q.scale_bytes[0], 128);
  EXPECT_EQ(ceil.q.scale_bytes[0], 129);
  EXPECT_EQ(floor.deq[0], 12.0);
  EXPECT_EQ(ceil.deq[0], 16.0);
  EXPECT_EQ(floor.saturated, 1.0f);
  EXPECT_EQ(ceil.saturated, 0.0f);
  // 13 / 2 = 6.5 rounds to 6 without counting as saturated.
  x[0] = 13;
  EXPECT_EQ(run(x, 1, 32, spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32)).saturated, 0.0f);
}

TEST(Quantize, ZeroBlockGetsTheSmallestE8m0Scale) {
  Result r =
      run(std::vector<float>(32, 0.0f), 1, 32, spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32));
  EXPECT_EQ(r.q.scale_bytes[0], 0);  // 2^-127
  for (uint8_t c : r.q.codes) EXPECT_EQ(c, 0);
  Result f = run(std::vector<float>(8, 0.0f), 2, 4, spec(Format::e4m3, ScaleRule::f32_amax, 0, 0));
  EXPECT_EQ(f.q.f32_scales[0], 1.0f);  // amax 0: m = s = 1
}

TEST(Quantize, PartialEdgeBlocks) {
  // (3, 40) in 1 x 32 blocks: grid (3, 2), the second block of each row has 8 elements.
  std::vector<float> x(3 * 40, 0.01f);
  for (int r = 0; r < 3; ++r) {
    x[size_t(r * 40)] = 100;     // floor(log2 100) = 6: code 127 + 6 - 8 = 125
    x[size_t(r * 40 + 35)] = 3;  // floor(log2 3) = 1: code 120
  }
  Result r = run(x, 3, 40, spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32));
  ASSERT_EQ(r.q.scale_bytes.size(), 6u);
  for (int row = 0; row < 3; ++row) {
    EXPECT_EQ(r.q.scale_bytes[size_t(row * 2)], 125);
    EXPECT_EQ(r.q.scale_bytes[size_t(row * 2 + 1)], 120);
    EXPECT_EQ(r.deq[size_t(row * 40 + 35)], 3.0);
  }
  // 128 x 128 f32 blocks over (130, 200): grid (2, 2) with edge blocks of 2 rows / 72 columns.
  std::vector<float> y(130 * 200);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> small(-0.4f, 0.4f);
  for (float& v : y) v = small(rng);
  y[5 * 200 + 7] = -4;         // block (0, 0)
  y[100 * 200 + 150] = 8;      // block (0, 1)
  y[129 * 200 + 0] = 1;        // block (1, 0)
  y[128 * 200 + 199] = -0.5f;  // block (1, 1)
  Result b = run(y, 130, 200, spec(Format::e4m3, ScaleRule::f32_amax, 128, 128));
  ASSERT_EQ(b.q.f32_scales.size(), 4u);
  EXPECT_EQ(b.q.f32_scales[0], 1.0f / (448.0f / 4.0f));
  EXPECT_EQ(b.q.f32_scales[1], 1.0f / (448.0f / 8.0f));
  EXPECT_EQ(b.q.f32_scales[2], 1.0f / (448.0f / 1.0f));
  EXPECT_EQ(b.q.f32_scales[3], 1.0f / (448.0f / 0.5f));
  for (int64_t r = 0; r < 130; ++r)
    for (int64_t k = 0; k < 200; ++k) {
      const float m = 448.0f / (r < 128 ? (k < 128 ? 4.0f : 8.0f) : (k < 128 ? 1.0f : 0.5f));
      ASSERT_EQ(b.q.codes[size_t(r * 200 + k)],
                lowp::encode(Format::e4m3, y[size_t(r * 200 + k)] * m))
          << r << "," << k;
    }
}

TEST(Quantize, F32AmaxRowBlocks) {
  // 1 x 128 blocks over (2, 256): block (0, 0) amax 2 -> m = 224, s = 1/224.
  std::vector<float> x(2 * 256, 0.0f);
  x[0] = 2;
  x[1] = 1;
  x[2] = 0.3f;  // 67.2 -> 64 (step 8)
  x[256 + 200] = -448;
  Result r = run(x, 2, 256, spec(Format::e4m3, ScaleRule::f32_amax, 1, 128));
  ASSERT_EQ(r.q.f32_scales.size(), 4u);
  const float s = 1.0f / 224.0f;
  EXPECT_EQ(r.q.f32_scales[0], s);
  EXPECT_EQ(r.q.f32_scales[1], 1.0f);  // all zeros
  EXPECT_EQ(r.q.f32_scales[2], 1.0f);
  EXPECT_EQ(r.q.f32_scales[3], 1.0f / (448.0f / 448.0f));
  EXPECT_EQ(r.deq[0], 448.0 * double(s));
  EXPECT_EQ(r.deq[1], 224.0 * double(s));
  EXPECT_EQ(r.deq[2], 64.0 * double(s));
  EXPECT_EQ(r.deq[256 + 200], -448.0);
  EXPECT_EQ(r.saturated, 0.0f);

  // Per tensor: amax 7 -> m = 64, every value scaled by a power of two.
  std::vector<float> t{1, -2, 3, 7, 0.5f, 0.25f};
  Result pt = run(t, 2, 3, spec(Format::e4m3, ScaleRule::f32_amax, 0, 0));
  EXPECT_EQ(pt.q.f32_scales[0], 1.0f / 64.0f);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(pt.deq[i], t[i]);
}

TEST(Quantize, Nvfp4GlobalAndBlockScales) {
  std::vector<float> x(48, 0.0f);
  x[0] = 12;  // block 0: tensor amax 12
  x[16] = 3;  // block 1: amax 3
  x[17] = 1.1f;
  x[32] = 1;  // block 2: amax 1
  x[33] = 0.5f;
  Result r = run(x, 1, 48, spec(Format::e2m1, ScaleRule::nvfp4, 1, 16));
  // s_enc = 6 * 448 / 12 = 224; g = 1/224.
  const float g = 1.0f / 224.0f;
  EXPECT_EQ(r.q.global, g);
  ASSERT_EQ(r.q.scale_bytes.size(), 3u);
  // Block 0: sb = e4m3(12/6 * 224 = 448) = 0x7e; elements x * 224/448: 12 -> 6.
  EXPECT_EQ(r.q.scale_bytes[0], 0x7e);
  EXPECT_EQ(r.deq[0], 6.0 * double(448.0f * g));
  // Block 1: sb = e4m3(112) = 0x6e (1.75 * 2^6); x * 2: 3 -> 6, 1.1 -> 2.2 -> 2.
  EXPECT_EQ(r.q.scale_bytes[1], 0x6e);
  EXPECT_EQ(r.deq[16], 6.0 * double(112.0f * g));
  EXPECT_EQ(r.deq[17], 2.0 * double(112.0f * g));
  // Block 2: 224/6 = 37.33 -> e4m3 36 = 0x61 (1.125 * 2^5); x * 224/36: 1 -> 6.22 rounds to 6
  // (below 7, so not counted as saturated), 0.5 -> 3.11 -> 3.
  EXPECT_EQ(r.q.scale_bytes[2], 0x61);
  EXPECT_EQ(r.deq[32], 6.0 * double(36.0f * g));
  EXPECT_EQ(r.deq[33], 3.0 * double(36.0f * g));
  EXPECT_EQ(r.saturated, 0.0f);
  EXPECT_EQ(r.amax, 12.0f);
}

// Quantizing in^T (in: (K, R)) gives the codes, scales and statistics of quantizing the transpose
// itself, also with stochastic rounding (draws indexed by the quantized element). The second shape
// spans several of the strip path's column tiles (256 columns of in, the last one partial), blocks
// taller than its strips (the per-tensor spec's 600 rows), and 1 x 128 blocks whose last one is
// partial; the first has an odd R (E2M1 tiles with a padding nibble); an imposed multiplier
// (delayed scaling) goes through it too.
TEST(Quantize, TransposedInputMatchesTheTranspose) {
  const QuantSpec specs[] = {spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32),
                             spec(Format::e4m3, ScaleRule::f32_amax, 1, 128),
                             spec(Format::e5m2, ScaleRule::f32_amax, 1, 16),
                             spec(Format::e4m3, ScaleRule::f32_amax, 128, 128),
                             spec(Format::e4m3, ScaleRule::f32_amax, 16, 16),
                             spec(Format::e2m1, ScaleRule::nvfp4, 1, 16),
                             spec(Format::e5m2, ScaleRule::f32_amax, 0, 0)};
  for (auto [R, K] : {std::pair<int64_t, int64_t>{45, 70}, {300, 600}}) {
    std::mt19937_64 rng(11);
    std::vector<float> kr = spread_values(rng, K * R);  // (K, R)
    // A NaN is ignored by every amax: here in block column 1 of quantized row 7 (input row 20).
    kr[size_t(20 * R + 7)] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> rk(size_t(R * K));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < K; ++k) rk[size_t(r * K + k)] = kr[size_t(k * R + r)];
    for (DType in_dtype : {DType::f32, DType::bf16, DType::f16}) {
      for (const QuantSpec& s : specs) {
        for (auto [multiplier, stochastic] :
             {std::pair{0.0f, false}, std::pair{0.75f, false}, std::pair{0.0f, true}}) {
          if (multiplier > 0 && !lowp::is_per_tensor(s, R, K)) continue;
          SCOPED_TRACE(lowp::describe(s) + " " + std::string(dtype_name(in_dtype)) + " " +
                       std::to_string(R) + "x" + std::to_string(K) + " multiplier " +
                       std::to_string(multiplier) + (stochastic ? " stochastic" : ""));
          auto quantized = [&](const std::vector<float>& values, Shape shape, bool transpose) {
            lowp::QTensor q = lowp::QTensor::empty(s, R, K, cpu());
            Tensor stats = Tensor::empty({2}, DType::f32, cpu());
            ops::quantize({.q = q,
                           .stats = stats,
                           .in = tensor_from_floats(values, shape, in_dtype, cpu()),
                           .transpose = transpose,
                           .multiplier = multiplier,
                           .stochastic = stochastic,
                           .seed = 5,
                           .first_index = 1000});
            return std::tuple{download_bytes(q.codes), download_bytes(q.scales),
                              tensor_to_floats(stats)};
          };
          const auto [codes, scales, stats] = quantized(kr, {K, R}, true);
          const auto [direct_codes, direct_scales, direct_stats] = quantized(rk, {R, K}, false);
          EXPECT_EQ(codes, direct_codes);
          EXPECT_EQ(scales, direct_scales);
          EXPECT_EQ(stats, direct_stats);
          // The floor rule saturates some values: their count is compared, not only zeros.
          if (s.rule == ScaleRule::e8m0_floor) {
            EXPECT_GT(stats[1], 0.0f);
          }
        }
      }
    }
  }
}

// What Linear's dgrad relies on (models/layers/linear.cpp, weight_transposes): with square
// blocks or one block per tensor, quantizing W^T gives the transpose of W's quantization, codes
// and scales, bit for bit, partial edge blocks included.
TEST(Quantize, SquareBlocksTransposeBitForBit) {
  const int64_t O = 200, I = 300;  // W (O, I): partial 128-blocks along both
  std::mt19937_64 rng(12);
  const std::vector<float> w = spread_values(rng, O * I);
  auto transposed_bytes = [](const Tensor& t) {  // a (R, C) one-byte or f32 tensor, transposed
    const std::vector<uint8_t> b = download_bytes(t);
    const int64_t R = t.size(0), C = t.size(1), e = int64_t(b.size()) / (R * C);
    std::vector<uint8_t> out(b.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t x = 0; x < e; ++x)
          out[size_t((c * R + r) * e + x)] = b[size_t((r * C + c) * e + x)];
    return out;
  };
  for (DType in_dtype : {DType::f32, DType::bf16})
    for (const QuantSpec& s : {spec(Format::e4m3, ScaleRule::f32_amax, 128, 128),
                               spec(Format::e4m3, ScaleRule::f32_amax, 0, 0),
                               spec(Format::e5m2, ScaleRule::f32_amax, 0, 0)}) {
      SCOPED_TRACE(lowp::describe(s) + " " + std::string(dtype_name(in_dtype)));
      const lowp::QTensor wq = quantize_values(cpu(), w, O, I, s, in_dtype);
      lowp::QTensor wtq = lowp::QTensor::empty(s, I, O, cpu());
      ops::quantize(
          {.q = wtq, .in = tensor_from_floats(w, {O, I}, in_dtype, cpu()), .transpose = true});
      EXPECT_EQ(download_bytes(wtq.codes), transposed_bytes(wq.codes));
      EXPECT_EQ(download_bytes(wtq.scales), transposed_bytes(wq.scales));
    }
}

TEST(Quantize, Bf16InputEqualsItsRoundedValues) {
  std::mt19937_64 rng(5);
  std::vector<float> x = spread_values(rng, 7 * 96);
  std::vector<float> rounded = tensor_to_floats(tensor_from_floats(x, {7, 96}, DType::bf16, cpu()));
  const QuantSpec s = spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32);
  EXPECT_EQ(download_bytes(quantize_values(cpu(), x, 7, 96, s, DType::bf16).codes),
            download_bytes(quantize_values(cpu(), rounded, 7, 96, s, DType::f32).codes));
}

std::vector<uint8_t> stochastic_codes(const std::vector<float>& x, int64_t rows, int64_t cols,
                                      const QuantSpec& s, uint64_t seed, uint64_t first_index) {
  Tensor in = tensor_from_floats(x, {rows, cols}, DType::f32, cpu());
  lowp::QTensor q = lowp::QTensor::empty(s, rows, cols, cpu());
  ops::quantize({.q = q, .in = in, .stochastic = true, .seed = seed, .first_index = first_index});
  return download_bytes(q.codes);
}

TEST(Quantize, StochasticRoundingIsReproducibleAndIndexedByPosition) {
  const int64_t R = 6, K = 256;
  std::mt19937_64 rng(9);
  std::vector<float> x = spread_values(rng, R * K);
  const QuantSpec s = spec(Format::e2m1, ScaleRule::f32_amax, 1, 0);  // one scale per row
  std::vector<uint8_t> a = stochastic_codes(x, R, K, s, 42, 1000);
  EXPECT_EQ(a, stochastic_codes(x, R, K, s, 42, 1000));
  EXPECT_NE(a, stochastic_codes(x, R, K, s, 43, 1000));
  // Rows 2..3 alone, with first_index advanced by 2 * K, give the same codes.
  std::vector<float> part(x.begin() + 2 * K, x.begin() + 4 * K);
  std::vector<uint8_t> b = stochastic_codes(part, 2, K, s, 42, 1000 + 2 * K);
  EXPECT_EQ(b, std::vector<uint8_t>(a.begin() + K, a.begin() + 2 * K));  // 2 codes per byte
}

TEST(Quantize, StochasticRoundingIsUnbiased) {
  // amax 1 -> m = 6 (E2M1): 0.3 * 6 = 1.8 lies between 1.5 and 2, rounds up with probability 0.6.
  const int64_t K = 8192;
  std::vector<float> x(K, 0.3f);
  x[0] = 1;
  const QuantSpec s = spec(Format::e2m1, ScaleRule::f32_amax, 0, 0);
  Tensor in = tensor_from_floats(x, {1, K}, DType::f32, cpu());
  lowp::QTensor q = lowp::QTensor::empty(s, 1, K, cpu());
  ops::quantize({.q = q, .in = in, .stochastic = true, .seed = 7});
  std::vector<double> deq = dequantize(to_host(q));
  double mean = 0;
  for (int64_t i = 1; i < K; ++i) mean += deq[size_t(i)];
  mean /= double(K - 1);
  EXPECT_NEAR(mean, 0.3, 3e-3);  // round to nearest would give 2/6 = 0.333
  lowp::QTensor nearest = quantize_values(cpu(), x, 1, K, s);
  EXPECT_NEAR(dequantize(to_host(nearest))[1], 2.0 / 6.0, 1e-6);
}

// Quantizes a (R, K) matrix (or its (K, R) transpose) of dtype on 1 and on 4 threads, with an
// imposed multiplier where one is given: the same codes, scales and statistics.
void expect_thread_count_independent(int64_t R, int64_t K, DType dtype, const QuantSpec& s,
                                     bool transpose, float multiplier = 0) {
  std::mt19937_64 rng(13);
  std::vector<float> x = spread_values(rng, R * K);
  auto bytes = [&] {
    Tensor in = tensor_from_floats(x, transpose ? Shape{K, R} : Shape{R, K}, dtype, cpu());
    lowp::QTensor q = lowp::QTensor::empty(s, R, K, cpu());
    Tensor stats = Tensor::empty({2}, DType::f32, cpu());
    ops::quantize({.q = q,
                   .stats = stats,
                   .in = in,
                   .transpose = transpose,
                   .multiplier = multiplier,
                   .stochastic = true});
    std::vector<uint8_t> all = download_bytes(q.codes);
    for (const Tensor& t : {q.scales, stats}) {
      std::vector<uint8_t> more = download_bytes(t);
      all.insert(all.end(), more.begin(), more.end());
    }
    return all;
  };
  std::vector<uint8_t> one;
  {
    CpuKernelThreads threads(1);
    one = bytes();
  }
  CpuKernelThreads threads(4);
  EXPECT_EQ(bytes(), one);
}

// The thread count also sets the transposed path's strips where their height is free (two-pass
// and imposed specs): 1 thread asks for 2 strips (of at most 256 rows), 4 threads for 8 (K 96: 3
// of 32 rows against 2 of 64 and 32; K 98 ends on a strip of 2 rows; R 300 takes two tiles of
// columns, and 4 threads then ask for 4 strips of each).
TEST(Quantize, ResultsDoNotDependOnTheThreadCount) {
  for (const auto& [R, K, dtype] : {std::tuple<int64_t, int64_t, DType>{100, 96, DType::f32},
                                    {100, 98, DType::f32},
                                    {100, 600, DType::f32},
                                    {100, 600, DType::bf16},
                                    {300, 128, DType::f32}})
    for (const QuantSpec& s : {spec(Format::e2m1, ScaleRule::nvfp4, 1, 16),
                               spec(Format::e4m3, ScaleRule::f32_amax, 64, 32),
                               spec(Format::e5m2, ScaleRule::e8m0_ceil, 1, 32)})
      for (bool transpose : {false, true}) {
        SCOPED_TRACE(fmt::format("R {} K {} {} {} transpose {}", R, K, dtype_name(dtype),
                                 lowp::describe(s), transpose));
        expect_thread_count_independent(R, K, dtype, s, transpose);
      }
  const QuantSpec per_tensor = spec(Format::e4m3, ScaleRule::f32_amax, 0, 0);
  for (bool transpose : {false, true}) {
    SCOPED_TRACE(fmt::format("imposed multiplier, transpose {}", transpose));
    expect_thread_count_independent(100, 600, DType::f32, per_tensor, transpose, 0.75f);
  }
}

TEST(Quantize, NanIsIgnoredByTheAmaxAndStaysNan) {
  std::vector<float> x(32, 0.0f);
  x[0] = std::nanf("");
  x[1] = 2;  // amax 2: floor(log2 2) = 1, code 127 + 1 - 8 = 120
  Result r = run(x, 1, 32, spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32));
  EXPECT_EQ(r.q.scale_bytes[0], 120);
  EXPECT_TRUE(std::isnan(r.deq[0]));
  EXPECT_EQ(r.deq[1], 2.0);
  EXPECT_EQ(r.amax, 2.0f);
  EXPECT_EQ(r.saturated, 0.0f);
}

TEST(Quantize, ImposedMultiplierForPerTensorSpecsOnly) {
  std::vector<float> x{1, -2, 104, 300};
  const QuantSpec per_tensor = spec(Format::e4m3, ScaleRule::f32_amax, 0, 0);
  Tensor in = tensor_from_floats(x, {2, 2}, DType::f32, cpu());
  lowp::QTensor q = lowp::QTensor::empty(per_tensor, 2, 2, cpu());
  Tensor stats = Tensor::empty({2}, DType::f32, cpu());
  ops::quantize({.q = q, .stats = stats, .in = in, .multiplier = 2});
  HostQ h = to_host(q);
  EXPECT_EQ(h.f32_scales[0], 0.5f);
  std::vector<double> deq = dequantize(h);
  EXPECT_EQ(deq[0], 1.0);
  EXPECT_EQ(deq[1], -2.0);
  EXPECT_EQ(deq[2], 104.0);  // 208 = 1.625 * 2^7
  EXPECT_EQ(deq[3], 224.0);  // 600 saturates to 448
  EXPECT_EQ(tensor_to_floats(stats), (std::vector<float>{300, 1}));

  const QuantSpec rows = spec(Format::e4m3, ScaleRule::f32_amax, 1, 128);
  lowp::QTensor r = lowp::QTensor::empty(rows, 2, 2, cpu());
  try {
    ops::quantize({.q = r, .in = in, .multiplier = 2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-tensor f32_amax spec, not e4m3 f32_amax 1x128"),
              std::string::npos)
        << e.what();
  }
}

TEST(Quantize, ArgumentErrorsNameTheSpec) {
  Tensor in = Tensor::empty({4, 6}, DType::f32, cpu());
  lowp::QTensor q =
      lowp::QTensor::empty(spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32), 4, 6, cpu());
  q.scales = Tensor::empty({4, 2}, DType::u8, cpu());
  try {
    ops::quantize({.q = q, .in = in});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q.scales is (4, 2) but e4m3 e8m0_floor 1x32 of (4, 6) "
                                         "needs (4, 1)"),
              std::string::npos)
        << e.what();
  }
  try {
    lowp::QTensor::empty(spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32), 4, 5, cpu());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("e2m1 needs an even K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lowp::QTensor::empty(spec(Format::e4m3, ScaleRule::nvfp4, 1, 16), 4, 16, cpu()),
               Error);
  lowp::QTensor ok =
      lowp::QTensor::empty(spec(Format::e4m3, ScaleRule::f32_amax, 0, 0), 6, 4, cpu());
  EXPECT_THROW(ops::quantize({.q = ok, .in = in}), Error);  // (4, 6) is not (6, 4)
  EXPECT_NO_THROW(ops::quantize({.q = ok, .in = in, .transpose = true}));
}

TEST(Quantize, SpecDescriptionsAndShapes) {
  EXPECT_EQ(lowp::describe(spec(Format::e4m3, ScaleRule::f32_amax, 1, 128)), "e4m3 f32_amax 1x128");
  EXPECT_EQ(lowp::describe(spec(Format::e5m2, ScaleRule::f32_amax, 0, 0)),
            "e5m2 f32_amax per-tensor");
  EXPECT_EQ(lowp::describe(spec(Format::e2m1, ScaleRule::nvfp4, 1, 16)), "e2m1 nvfp4 1x16");
  EXPECT_EQ(lowp::describe(spec(Format::e4m3, ScaleRule::e8m0_ceil, 0, 32)), "e4m3 e8m0_ceil Rx32");
  EXPECT_EQ(lowp::scale_shape(spec(Format::e4m3, ScaleRule::f32_amax, 128, 128), 130, 256),
            (Shape{2, 2}));
  EXPECT_EQ(lowp::scale_shape(spec(Format::e4m3, ScaleRule::f32_amax, 0, 0), 3, 5), (Shape{1, 1}));
  EXPECT_EQ(lowp::element_dtype(Format::e2m1), DType::f4e2m1);
  EXPECT_EQ(lowp::scale_dtype(ScaleRule::nvfp4), DType::f8e4m3);
  EXPECT_EQ(lowp::scale_dtype(ScaleRule::e8m0_ceil), DType::u8);
  lowp::QTensor q = lowp::QTensor::empty(spec(Format::e2m1, ScaleRule::nvfp4, 1, 16), 3, 40, cpu());
  EXPECT_EQ(q.codes.dtype(), DType::f4e2m1);
  EXPECT_EQ(q.scales.shape(), (Shape{3, 3}));
  EXPECT_EQ(q.global.numel(), 1);
}

// core/tensor_host.h converts code tensors (no scale): FORMATS.md's examples.
TEST(Quantize, HostConversionOfCodeTensors) {
  Tensor e4 =
      tensor_from_floats(std::vector<float>{0.1f, 1.0625f, -2.7f, 460}, {4}, DType::f8e4m3, cpu());
  EXPECT_EQ(tensor_to_floats(e4), (std::vector<float>{0.1015625f, 1, -2.75f, 448}));
  Tensor e2 = tensor_from_floats(std::vector<float>{0.75f, 2.5f, 5, 7, -0.25f, 3}, {2, 3},
                                 DType::f4e2m1, cpu());
  EXPECT_EQ(tensor_to_floats(e2), (std::vector<float>{1, 2, 4, 6, -0.0f, 3}));
  uint8_t packed[2] = {0, 0};
  store_host_element(packed, DType::f4e2m1, 1, 1.5);
  store_host_element(packed, DType::f4e2m1, 2, -6);
  EXPECT_EQ(packed[0], 0x30);
  EXPECT_EQ(packed[1], 0x0f);
  EXPECT_EQ(load_host_element(packed, DType::f4e2m1, 1), 1.5);
  EXPECT_EQ(load_host_element(packed, DType::f4e2m1, 2), -6.0);
}

TEST(Quantize, UnsupportedOnAChipWithoutFp8Storage) {
  Device& chip = lowp_runtime().device("vchip:nof8chip");
  EXPECT_FALSE(chip.supports(Op::quantize, DType::f8e4m3));
  Tensor in = Tensor::zeros({2, 32}, DType::f32, chip);
  lowp::QTensor q = lowp::QTensor::empty(spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32), 2, 32,
                                         lowp_runtime().device("vchip:fp8chip"));
  q.codes = Tensor::empty({2, 32}, DType::f8e4m3, chip);  // can be allocated, not computed
  q.scales = Tensor::empty({2, 1}, DType::u8, chip);
  EXPECT_THROW(ops::quantize({.q = q, .in = in}), UnsupportedError);
}

}  // namespace
}  // namespace h2::test
