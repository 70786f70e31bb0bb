// The batch nvfp4 block scales (core/lowp/block_scales.h) against the rule of quant_spec.h
// written out with the scalar codec (itself checked against ml_dtypes): sb = E4M3(amax / 6 *
// s_enc), saturating, round to nearest even; multiplier s_enc / decode(sb), 0 where sb decodes to
// 0. Amaxes from 0 and FP32's smallest subnormal to infinity, log-uniform between, across the
// lengths the vector loops split (tails of every size up to 40).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/lowp/block_scales.h"
#include "core/lowp/formats.h"

namespace h2::lowp {
namespace {

TEST(LowpBlockScales, Nvfp4ScalesOfManyBlocksFollowTheRuleBlockByBlock) {
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
  for (const float tensor_amax : {1.0f, 2688.0f, 1e-20f, 3e35f}) {
    const float s_enc = 2688.0f / tensor_amax, global = 1.0f / s_enc;
    for (int64_t n : {int64_t(1000), int64_t(1), int64_t(15), int64_t(17), int64_t(40)}) {
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

}  // namespace
}  // namespace h2::lowp
