// The row loops of backends/cpu/kernels/wide_rows.h against double-precision formulas, on the
// build this CPU runs (x86-64-v4 where it has AVX512F/BW/DQ/VL; the baseline in the avx2 capped
// run): lengths on both sides of 8- and 16-lane vectors, inputs where exp overflows and
// underflows, outputs written over their inputs, and the choice of build itself.
#include "backends/cpu/kernels/wide_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/fastest_build.h"

namespace h2::cpu {
namespace {

constexpr int64_t kLengths[] = {0, 1, 7, 8, 15, 16, 17, 33, 1000};

// Values in [-12, 12], with the ends where exp leaves float's range for an argument of either
// sign (it saturates to 0 or infinity, and silu to 0 or x) at the start of every row.
std::vector<float> values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-12, 12);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  const float ends[] = {-100.0f, 100.0f, -0.0f, 1e-30f};
  for (size_t i = 0; i < v.size() && i < std::size(ends); ++i) v[i] = ends[i];
  return v;
}

double sigmoid(double g) {
  return 1.0 / (1.0 + std::exp(-g));
}

// exp_f32 is within 2 ulp and each formula adds a few roundings: 1e-6 relative, `room` more
// where the formula cancels; past float's range, infinity.
void expect_near(double got, double want, const std::string& what, double room = 0) {
  if (want > 3.4028234663852886e38) {
    EXPECT_TRUE(std::isinf(got) && got > 0) << what << ": " << got;
    return;
  }
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want) + room + 1e-30) << what;
}

// in_fastest_build's choice (core/fastest_build.h), which these loops run in: the x86-64-v4
// build where the CPU has AVX512F/BW/DQ/VL visible under the cap (GCC builds on x86-64).
TEST(WideRows, RunInTheV4BuildExactlyWhereTheCpuAndTheCapAllowIt) {
  const bool has = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw) &&
                   cpu_has(CpuFeature::avx512dq) && cpu_has(CpuFeature::avx512vl);
#if defined(__x86_64__) && !defined(__clang__)
  EXPECT_EQ(run_v4_build(), has);  // the cap hides the features from cpu_has too
#else
  EXPECT_FALSE(run_v4_build());
#endif
  const char* cap = std::getenv("H2_CPU_MAX_ISA");
  if (cap != nullptr && std::string(cap) == "avx2") {
    EXPECT_FALSE(run_v4_build());
  }
}

TEST(WideRows, SwigluForwardMatchesTheFormula) {
  for (int64_t n : kLengths) {
    const std::vector<float> gate = values(n, 1), up = values(n, 2);
    std::vector<float> out(static_cast<size_t>(n), -1.0f);
    swiglu_fwd_row(gate.data(), up.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[size_t(i)];
      expect_near(out[size_t(i)], g * sigmoid(g) * up[size_t(i)],
                  "n " + std::to_string(n) + " i " + std::to_string(i));
    }
  }
}

TEST(WideRows, SwigluBackwardMatchesTheFormulaWritingOverItsInputs) {
  for (int64_t n : kLengths) {
    const std::vector<float> gate = values(n, 3), up = values(n, 4), dout = values(n, 5);
    std::vector<float> dgate = gate, dup = up;  // written over gate and up
    swiglu_bwd_row(dgate.data(), dup.data(), dout.data(), dgate.data(), dup.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[size_t(i)], u = up[size_t(i)], d = dout[size_t(i)];
      const double s = sigmoid(g);
      const std::string what = "n " + std::to_string(n) + " i " + std::to_string(i);
      // 1 - s loses s's relative precision as s nears 1: about |g| float epsilons of d u.
      expect_near(dgate[size_t(i)], d * u * s * (1 + g * (1 - s)), what + " dgate",
                  2.5e-7 * std::abs(d * u) * (1 + std::abs(g)));
      expect_near(dup[size_t(i)], d * g * s, what + " dup");
    }
  }
}

TEST(WideRows, ExponentialsOfShiftedRowsAndTheirSum) {
  for (int64_t n : kLengths) {
    // Shifted by the row's largest value, as the softmax does, so the sum is finite: every lane
    // and the tail add into it.
    std::vector<float> p = values(n, 6);
    if (n > 1) p[1] = 2.0f;  // not values()' 100, which would overflow every sum
    const float shift = n > 0 ? *std::max_element(p.begin(), p.end()) : 0.0f;
    std::vector<float> with_sum = p, plain = p;
    const float sum = exp_shifted_sum(with_sum.data(), n, shift);
    exp_shifted(plain.data(), n, shift);
    double want_sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double want = std::exp(double(p[size_t(j)] - shift));  // the float difference
      const std::string what = "n " + std::to_string(n) + " j " + std::to_string(j);
      expect_near(with_sum[size_t(j)], want, what);
      EXPECT_EQ(plain[size_t(j)], with_sum[size_t(j)]) << what;
      want_sum += want;
    }
    expect_near(sum, want_sum, "sum, n " + std::to_string(n));
  }
  // Past float's range: infinity, as expf gives (a shift below the values).
  std::vector<float> big = {100.0f, 95.0f, -200.0f};
  exp_shifted(big.data(), int64_t(big.size()), 0.0f);
  EXPECT_TRUE(std::isinf(big[0]) && std::isinf(big[1]));
  EXPECT_EQ(big[2], 0.0f);
}

}  // namespace
}  // namespace h2::cpu
