// The batch block scales (core/lowp/block_scales.h) against the rules of quant_spec.h written out
// here: nvfp4 with the scalar codec (itself checked against ml_dtypes): sb = E4M3(amax / 6 *
// s_enc), saturating, round to nearest even; multiplier s_enc / decode(sb), 0 where sb decodes to
// 0. f32_amax: m = max_finite / amax (1 for 0 and infinity, at most FLT_MAX), s = 1 / m. E8M0:
// the exponent e from the binades in double precision, floor(log2 amax) - floor(log2 max_finite),
// one more for e8m0_ceil where amax exceeds max_finite * 2^e, clamped to [-127, 127]. Amaxes from
// 0 and FP32's smallest subnormal to infinity, log-uniform between, across the lengths the vector
// loops split (tails of every size up to 40).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/lowp/block_scales.h"
#include "core/lowp/formats.h"

namespace h2::lowp {
namespace {

std::vector<float> test_amaxes() {
  std::vector<float> amax = {0.0f,
                             std::numeric_limits<float>::denorm_min(),
                             1e-30f,
                             0.5f,
                             6.0f,
                             2688.0f,
                             448.0f * 6.0f,
                             1e30f,
                             std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-140.0f, 128.0f);
  while (amax.size() < 1000) amax.push_back(std::exp2(exponent(rng)));
  return amax;
}

const std::vector<int64_t> kLengths = {1000, 1, 15, 17, 40};

TEST(LowpBlockScales, Nvfp4ScalesOfManyBlocksFollowTheRuleBlockByBlock) {
  const std::vector<float> amax = test_amaxes();
  for (const float tensor_amax : {1.0f, 2688.0f, 1e-20f, 3e35f}) {
    const float s_enc = 2688.0f / tensor_amax, global = 1.0f / s_enc;
    for (const int64_t n : kLengths) {
      std::vector<float> multipliers(size_t(n), -1.0f);
      std::vector<uint8_t> codes(size_t(n), 0xAB);
      nvfp4_scales_n(amax.data(), n, s_enc, global, multipliers.data(), codes.data());
      for (int64_t b = 0; b < n; ++b) {
        const uint8_t sb = encode(Format::e4m3, amax[size_t(b)] / 6.0f * s_enc, Overflow::saturate);
        const float d = decode(Format::e4m3, sb);
        const float expected = d > 0 ? s_enc / d : 0.0f;
        EXPECT_EQ(codes[size_t(b)], sb) << "amax " << amax[size_t(b)] << " s_enc " << s_enc;
        EXPECT_EQ(std::bit_cast<uint32_t>(multipliers[size_t(b)]),
                  std::bit_cast<uint32_t>(expected))
            << "amax " << amax[size_t(b)] << " s_enc " << s_enc << ": " << multipliers[size_t(b)]
            << " vs " << expected;
      }
    }
  }
}

TEST(LowpBlockScales, F32AmaxScalesOfManyBlocksFollowTheRuleBlockByBlock) {
  const std::vector<float> amax = test_amaxes();
  for (const float max_finite : {448.0f, 57344.0f, 6.0f}) {
    for (const int64_t n : kLengths) {
      std::vector<float> multipliers(size_t(n), -1.0f), scales(size_t(n), -1.0f);
      f32_amax_scales_n(amax.data(), n, max_finite, multipliers.data(), scales.data());
      for (int64_t b = 0; b < n; ++b) {
        const float a = amax[size_t(b)];
        float m = 1.0f;
        if (a > 0 && std::isfinite(a)) {
          const float ratio = max_finite / a;
          m = std::isfinite(ratio) ? ratio : std::numeric_limits<float>::max();
        }
        EXPECT_EQ(std::bit_cast<uint32_t>(multipliers[size_t(b)]), std::bit_cast<uint32_t>(m))
            << "amax " << a << " max " << max_finite;
        EXPECT_EQ(std::bit_cast<uint32_t>(scales[size_t(b)]), std::bit_cast<uint32_t>(1.0f / m))
            << "amax " << a << " max " << max_finite;
      }
    }
  }
}

TEST(LowpBlockScales, E8m0ScalesOfManyBlocksFollowTheRuleBlockByBlock) {
  const std::vector<float> amax = test_amaxes();
  for (const bool round_up : {false, true}) {
    for (const float max_finite : {448.0f, 57344.0f, 6.0f}) {
      for (const int64_t n : kLengths) {
        // In place, as the quantizer calls it: the multipliers over the amaxes.
        std::vector<float> multipliers(amax.begin(), amax.begin() + n);
        std::vector<uint8_t> codes(size_t(n), 0xAB);
        e8m0_scales_n(multipliers.data(), n, round_up, max_finite, multipliers.data(),
                      codes.data());
        for (int64_t b = 0; b < n; ++b) {
          const double a = amax[size_t(b)];
          int e = 127;
          if (!(a > 0)) {
            e = -127;
          } else if (std::isfinite(a)) {
            e = std::ilogb(a) - std::ilogb(double(max_finite));
            if (round_up && a > std::ldexp(double(max_finite), e)) ++e;
            e = std::clamp(e, -127, 127);
          }
          EXPECT_EQ(int(codes[size_t(b)]), e + 127) << "amax " << a << " max " << max_finite;
          EXPECT_EQ(double(multipliers[size_t(b)]), std::ldexp(1.0, -e))
              << "amax " << a << " max " << max_finite << " round_up " << round_up;
        }
      }
    }
  }
}

}  // namespace
}  // namespace h2::lowp
