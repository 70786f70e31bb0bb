// The CUDA quantize and qmatmul kernels against the CPU ones on the same inputs (CTest label
// `cuda`: runs only where a GPU is visible; skipped without one). quantize must give the same
// codes, scales and stats byte for byte (both backends share core/lowp/format_codec.h and
// core/lowp/block_scale.h); qmatmul agrees to FP32 accumulation-order error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::Format;
using lowp::QuantSpec;
using lowp::ScaleRule;

const QuantSpec kSpecs[] = {
    spec(Format::e4m3, ScaleRule::f32_amax, 1, 128),
    spec(Format::e4m3, ScaleRule::f32_amax, 128, 128),
    spec(Format::e5m2, ScaleRule::f32_amax, 0, 0),
    spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32),
    spec(Format::e5m2, ScaleRule::e8m0_ceil, 1, 32),
    spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32),
    spec(Format::e2m1, ScaleRule::nvfp4, 1, 16),
    spec(Format::e4m3, ScaleRule::f32_amax, 16, 0),
};

class LowpCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    Backend* cuda = lowp_runtime().backend("cuda");
    if (cuda == nullptr || cuda->device_count() == 0)
      GTEST_SKIP() << "no CUDA backend or no GPU in this build/machine";
    gpu = &cuda->device(0);
  }
  Device* gpu = nullptr;
};

struct Quantized {
  lowp::QTensor q;
  std::vector<float> stats;
};

Quantized quantize_on(Device& device, const std::vector<float>& kr_values, int64_t R, int64_t K,
                      const QuantSpec& s, DType in_dtype, bool transpose, bool stochastic) {
  Device& cpu = lowp_runtime().cpu();
  const Shape in_shape = transpose ? Shape{K, R} : Shape{R, K};
  Tensor in = tensor_from_floats(kr_values, in_shape, in_dtype, cpu).to(device);
  lowp::QTensor q = lowp::QTensor::empty(s, R, K, device);
  Tensor stats = Tensor::empty({2}, DType::f32, device);
  ops::quantize({.q = q,
                 .stats = stats,
                 .in = in,
                 .transpose = transpose,
                 .stochastic = stochastic,
                 .seed = 99,
                 .first_index = 5});
  return {q, tensor_to_floats(stats)};
}

TEST_F(LowpCuda, QuantizeMatchesCpuByteForByte) {
  Device& cpu = lowp_runtime().cpu();
  std::mt19937_64 rng(31);
  for (const auto& [R, K] : {std::pair<int64_t, int64_t>{45, 70}, {300, 512}, {1, 16}}) {
    std::vector<float> x = spread_values(rng, R * K);
    for (const QuantSpec& s : kSpecs)
      for (DType in_dtype : {DType::f32, DType::bf16})
        for (bool transpose : {false, true})
          for (bool stochastic : {false, true}) {
            SCOPED_TRACE(fmt::format("{} ({}, {}) {} transpose {} stochastic {}", lowp::describe(s),
                                     R, K, dtype_name(in_dtype), transpose, stochastic));
            Quantized want = quantize_on(cpu, x, R, K, s, in_dtype, transpose, stochastic);
            Quantized got = quantize_on(*gpu, x, R, K, s, in_dtype, transpose, stochastic);
            EXPECT_EQ(download_bytes(got.q.codes), download_bytes(want.q.codes));
            EXPECT_EQ(download_bytes(got.q.scales), download_bytes(want.q.scales));
            if (s.rule == ScaleRule::nvfp4) {
              EXPECT_EQ(download_bytes(got.q.global), download_bytes(want.q.global));
            }
            EXPECT_EQ(got.stats, want.stats);
          }
  }
}

TEST_F(LowpCuda, QmatmulMatchesCpu) {
  Device& cpu = lowp_runtime().cpu();
  std::mt19937_64 rng(37);
  struct Shape3 {
    int64_t M, N, K;
  };
  for (const Shape3& d : {Shape3{37, 53, 96}, Shape3{130, 70, 1152}, Shape3{256, 192, 512}})
    for (size_t i = 0; i < std::size(kSpecs); ++i)
      for (DType out_dtype : {DType::f32, DType::bf16}) {
        const QuantSpec& sa = kSpecs[i];
        const QuantSpec& sb = kSpecs[(i + 3) % std::size(kSpecs)];
        SCOPED_TRACE(fmt::format("a {} b {} ({}, {}, {}) {}", lowp::describe(sa),
                                 lowp::describe(sb), d.M, d.N, d.K, dtype_name(out_dtype)));
        std::vector<float> av = spread_values(rng, d.M * d.K);
        std::vector<float> bv = spread_values(rng, d.N * d.K);
        std::vector<float> cv = spread_values(rng, d.M * d.N);
        lowp::QTensor a = quantize_values(cpu, av, d.M, d.K, sa);
        lowp::QTensor b = quantize_values(cpu, bv, d.N, d.K, sb);
        lowp::QTensor a_gpu{a.codes.to(*gpu), a.scales.to(*gpu),
                            a.global.defined() ? a.global.to(*gpu) : Tensor(), a.spec};
        lowp::QTensor b_gpu{b.codes.to(*gpu), b.scales.to(*gpu),
                            b.global.defined() ? b.global.to(*gpu) : Tensor(), b.spec};
        Tensor out = tensor_from_floats(cv, {d.M, d.N}, out_dtype, cpu);
        Tensor out_gpu = out.to(*gpu);
        ops::qmatmul({.out = out, .a = a, .b = b, .alpha = 0.75f, .beta = 0.5f});
        ops::qmatmul({.out = out_gpu, .a = a_gpu, .b = b_gpu, .alpha = 0.75f, .beta = 0.5f});
        std::vector<float> want = tensor_to_floats(out), got = tensor_to_floats(out_gpu);
        double max_diff = 0, max_ref = 0;
        for (size_t j = 0; j < want.size(); ++j) {
          max_diff = std::max(max_diff, std::fabs(double(got[j]) - double(want[j])));
          max_ref = std::max(max_ref, std::fabs(double(want[j])));
        }
        const double tol = out_dtype == DType::f32 ? 1e-5 : 1e-2;
        EXPECT_LE(max_diff, tol * max_ref)
            << "max |diff| " << max_diff << ", max |cpu| " << max_ref;
      }
}

}  // namespace
}  // namespace h2::test
