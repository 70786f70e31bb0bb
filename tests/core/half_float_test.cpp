// Exhaustive checks of the bf16/f16 conversions against double-precision arithmetic: every
// 16-bit pattern decodes to the value its fields define, and f32 -> 16-bit rounds to the
// nearest representable value (ties to even), checked on every f32 near each representable value.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/half_float.h"

namespace h2 {
namespace {

// Value of a 16-bit IEEE-style pattern from its fields, in double: 1 sign bit, `exponent_bits`
// (bias 2^(exponent_bits - 1) - 1), the rest mantissa; all-ones exponent Inf or NaN.
double half_reference(uint16_t bits, int exponent_bits) {
  const int mantissa_bits = 15 - exponent_bits, bias = (1 << (exponent_bits - 1)) - 1;
  const int sign = bits >> 15, exp = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mant = bits & ((1 << mantissa_bits) - 1);
  const double s = sign ? -1.0 : 1.0;
  if (exp == (1 << exponent_bits) - 1)
    return mant ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
  if (exp == 0) return s * std::ldexp(double(mant), 1 - bias - mantissa_bits);  // subnormal
  return s * std::ldexp(1.0 + std::ldexp(double(mant), -mantissa_bits), exp - bias);
}
double f16_reference(uint16_t h) {  // 5 exponent bits, 10 mantissa bits
  return half_reference(h, 5);
}
double bf16_reference(uint16_t b) {  // 8 exponent bits, 7 mantissa bits
  return half_reference(b, 8);
}

TEST(HalfFloat, F16DecodesEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    double ref = f16_reference(uint16_t(h));
    float got = f16_to_f32(uint16_t(h));
    if (std::isnan(ref))
      EXPECT_TRUE(std::isnan(got)) << h;
    else
      EXPECT_EQ(double(got), ref) << "pattern " << h;
  }
}

TEST(HalfFloat, Bf16DecodesEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double ref = bf16_reference(uint16_t(b));
    float got = bf16_to_f32(uint16_t(b));
    if (std::isnan(ref))
      EXPECT_TRUE(std::isnan(got)) << b;
    else
      EXPECT_EQ(double(got), ref) << "pattern " << b;
  }
}

TEST(HalfFloat, Bf16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float value = bf16_to_f32(uint16_t(b));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(value))));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(value), uint16_t(b));
  }
}

TEST(HalfFloat, F16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float value = f16_to_f32(uint16_t(h));
    if (std::isnan(value)) continue;
    uint16_t back = f32_to_f16(value);
    EXPECT_EQ(back, uint16_t(h)) << "pattern " << h;  // zeros keep their sign
  }
}

// Nearest-even rounding checked against double arithmetic on values between neighbours.
template <class Decode, class Encode>
void check_rounding(Decode decode, Encode encode, uint32_t last_finite) {
  for (uint32_t p = 0; p < last_finite; ++p) {
    double lo = decode(uint16_t(p)), hi = decode(uint16_t(p + 1));
    double mid = (lo + hi) / 2;
    for (double frac : {0.1, 0.4999, 0.5, 0.5001, 0.9}) {
      double x = lo + (hi - lo) * frac;
      float xf = float(x);
      double exact = double(xf);  // the f32 we actually convert
      uint16_t want;
      if (exact < mid)
        want = uint16_t(p);
      else if (exact > mid)
        want = uint16_t(p + 1);
      else
        want = (p % 2 == 0) ? uint16_t(p) : uint16_t(p + 1);
      ASSERT_EQ(encode(xf), want) << "x=" << exact << " between patterns " << p << " and " << p + 1;
    }
  }
}

TEST(HalfFloat, F16RoundsToNearestEven) {
  check_rounding([](uint16_t h) { return double(f16_to_f32(h)); }, f32_to_f16, 0x7bff);
}

TEST(HalfFloat, Bf16RoundsToNearestEven) {
  check_rounding([](uint16_t b) { return double(bf16_to_f32(b)); }, f32_to_bf16, 0x7f7f);
}

TEST(HalfFloat, OverflowAndNaN) {
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie between 65504 and 65536 rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

}  // namespace
}  // namespace h2
