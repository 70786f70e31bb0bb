// Tests of the low-precision element formats (core/lowp/formats.h) against independent
// references: decoded values from the textbook formula in double, rounding against a brute-force
// nearest-value search, the examples of FORMATS.md, and the batch encoders against the scalar
// reference bit for bit.
#include "core/lowp/formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/lowp/format_codec.h"

namespace h2::lowp {
namespace {

constexpr Format kElementFormats[] = {Format::e4m3, Format::e5m2, Format::e2m1};
constexpr Format kAllFormats[] = {Format::e4m3, Format::e5m2, Format::e2m1, Format::e8m0};
constexpr Overflow kOverflows[] = {Overflow::saturate, Overflow::standard};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Bit layout of a signed element format, written out here independently of the library.
struct Layout {
  int bits, exponent_bits, mantissa_bits, bias;
};

Layout layout(Format f) {
  switch (f) {
    case Format::e4m3:
      return {8, 4, 3, 7};
    case Format::e5m2:
      return {8, 5, 2, 15};
    case Format::e2m1:
      return {4, 2, 1, 1};
    case Format::e8m0:
      break;
  }
  return {8, 8, 0, 127};
}

int code_count(Format f) {
  return f == Format::e2m1 ? 16 : 256;
}
std::string name(Format f) {
  return std::string(format_info(f).name);
}

// sign * 2^(e - bias) * (1 + m / 2^M), subnormals sign * 2^(1 - bias) * (m / 2^M), in double.
double reference_decode(Format f, int code) {
  if (f == Format::e8m0) return code == 255 ? NAN : std::ldexp(1.0, code - 127);
  const Layout l = layout(f);
  const bool negative = (code >> (l.bits - 1)) & 1;
  const int magnitude = code & ((1 << (l.bits - 1)) - 1);
  const int e = magnitude >> l.mantissa_bits;
  const int m = magnitude & ((1 << l.mantissa_bits) - 1);
  const double fraction = std::ldexp(m, -l.mantissa_bits);
  double value = e == 0 ? std::ldexp(fraction, 1 - l.bias) : std::ldexp(1 + fraction, e - l.bias);
  if (f == Format::e4m3 && magnitude == 0x7f) value = NAN;
  if (f == Format::e5m2 && e == 31) value = m == 0 ? INFINITY : NAN;
  return negative ? -value : value;
}

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

bool same_bits_or_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

float from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

// The finite non-negative values of a format with their codes, ascending.
std::vector<std::pair<double, int>> finite_grid(Format f) {
  std::vector<std::pair<double, int>> grid;
  const int sign_bit = 1 << (layout(f).bits - 1);
  for (int code = 0; code < sign_bit; ++code) {
    const double v = reference_decode(f, code);
    if (std::isfinite(v)) grid.push_back({v, code});
  }
  std::sort(grid.begin(), grid.end());
  return grid;
}

// Brute-force round to nearest, ties to the even code, of |x| <= max_finite: the code of |x|.
int nearest_magnitude_code(const std::vector<std::pair<double, int>>& grid, double x) {
  const double ax = std::fabs(x);
  int best = grid[0].second;
  double best_distance = INFINITY;
  for (const auto& [value, code] : grid) {
    const double d = std::fabs(value - ax);
    if (d < best_distance || (d == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = d;
    }
  }
  return best;
}

double decoded(Format f, float x, Overflow o = Overflow::saturate) {
  return decode(f, encode(f, x, o));
}

TEST(LowpFormats, FormatInfoAndNames) {
  EXPECT_EQ(format_info(Format::e4m3).max_finite, 448.0f);
  EXPECT_EQ(format_info(Format::e5m2).max_finite, 57344.0f);
  EXPECT_EQ(format_info(Format::e2m1).max_finite, 6.0f);
  EXPECT_EQ(format_info(Format::e8m0).max_finite, std::ldexp(1.0f, 127));
  for (Format f : kAllFormats) {
    const FormatInfo& info = format_info(f);
    EXPECT_EQ(parse_format(info.name), f);
    EXPECT_EQ(info.bits, f == Format::e2m1 ? 4 : 8);
    EXPECT_EQ(info.exponent_bits + info.mantissa_bits + (f == Format::e8m0 ? 0 : 1), info.bits);
    if (f == Format::e8m0) continue;
    // The table's facts agree with the decoded codes.
    const auto grid = finite_grid(f);
    EXPECT_EQ(grid.back().first, info.max_finite) << info.name;
    EXPECT_EQ(grid[1].first, info.min_subnormal) << info.name;
    EXPECT_EQ(grid[size_t{1} << info.mantissa_bits].first, info.min_normal) << info.name;
    EXPECT_EQ(info.unit_roundoff, std::ldexp(1.0f, -info.mantissa_bits - 1)) << info.name;
  }
}

TEST(LowpFormats, ParseRejectsUnknownNamesListingTheValidOnes) {
  try {
    parse_format("fp8");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'fp8'"), std::string::npos) << message;
    for (const char* valid : {"e4m3", "e5m2", "e2m1", "e8m0"}) {
      EXPECT_NE(message.find(valid), std::string::npos) << message;
    }
  }
  EXPECT_THROW(parse_format("E4M3"), ConfigError);
  EXPECT_THROW(parse_format(""), ConfigError);
}

TEST(LowpFormats, ExamplesFromFormatsMd) {
  EXPECT_EQ(decoded(Format::e4m3, 0.1f), 0.1015625);
  EXPECT_EQ(decoded(Format::e4m3, 1.0625f), 1.0);  // tie to even
  EXPECT_EQ(decoded(Format::e4m3, -2.7f), -2.75);
  EXPECT_EQ(decoded(Format::e4m3, 460.0f), 448.0);  // saturated
  EXPECT_EQ(decoded(Format::e2m1, 0.75f), 1.0);     // tie to even
  EXPECT_EQ(decoded(Format::e2m1, 2.5f), 2.0);
  EXPECT_EQ(decoded(Format::e2m1, 5.0f), 4.0);
  EXPECT_EQ(decoded(Format::e2m1, 7.0f), 6.0);
  int non_negative_finite = 0;
  for (int code = 0; code < 256; ++code) {
    const float v = decode(Format::e4m3, static_cast<uint8_t>(code));
    non_negative_finite += std::isfinite(v) && !std::signbit(v);
  }
  EXPECT_EQ(non_negative_finite, 127);
}

TEST(LowpFormats, EveryCodeDecodesToTheTextbookValue) {
  for (Format f : kAllFormats) {
    const float* table = decode_table(f);
    for (int code = 0; code < code_count(f); ++code) {
      const double expected = reference_decode(f, code);
      const float got = decode(f, static_cast<uint8_t>(code));
      EXPECT_TRUE(same_value(got, expected)) << name(f) << " code " << code << ": " << got;
      EXPECT_TRUE(same_bits_or_nan(table[code], got)) << name(f) << " code " << code;
    }
  }
  // E2M1 uses the low nibble of a byte.
  for (int code = 16; code < 256; ++code) {
    EXPECT_TRUE(same_bits_or_nan(decode(Format::e2m1, static_cast<uint8_t>(code)),
                                 decode(Format::e2m1, static_cast<uint8_t>(code & 15))));
  }
}

// Decoding and re-encoding gives the same code, -0 included (its sign is kept). NaN codes are
// left out (NaN encodes to one canonical code), and so are E5M2's +-Inf in saturating mode,
// which encode to +-max_finite.
TEST(LowpFormats, EveryCodeRoundTrips) {
  for (Format f : kAllFormats) {
    for (Overflow o : kOverflows) {
      for (int code = 0; code < code_count(f); ++code) {
        const float v = decode(f, static_cast<uint8_t>(code));
        if (std::isnan(v) || (std::isinf(v) && o == Overflow::saturate)) continue;
        EXPECT_EQ(encode(f, v, o), code) << name(f) << " value " << v;
      }
    }
  }
  EXPECT_EQ(encode(Format::e5m2, kInf, Overflow::saturate), 0x7b);
  EXPECT_EQ(encode(Format::e5m2, -kInf, Overflow::saturate), 0xfb);
  EXPECT_EQ(encode(Format::e4m3, -0.0f), 0x80);
  EXPECT_EQ(encode(Format::e2m1, -0.0f), 0x8);
}

// Random values spread over each format's whole finite range (subnormals and ties included)
// round to the nearest value, ties to the even code, as a brute-force search finds.
TEST(LowpFormats, RoundsToNearestEvenLikeABruteForceSearch) {
  std::mt19937_64 rng(11);
  for (Format f : kElementFormats) {
    const auto grid = finite_grid(f);
    const double lo = std::log2(grid[1].first / 8);
    const double hi = std::log2(grid.back().first);
    std::uniform_real_distribution<double> log2_magnitude(lo, hi);
    for (int i = 0; i < 100000; ++i) {
      float x;
      if (i % 4 == 0) {  // exactly between two neighbours: a tie
        const size_t k = rng() % (grid.size() - 1);
        x = static_cast<float>((grid[k].first + grid[k + 1].first) / 2);
      } else {
        x = static_cast<float>(std::exp2(log2_magnitude(rng)));
      }
      if (rng() & 1) x = -x;
      const int sign = std::signbit(x) ? 1 << (layout(f).bits - 1) : 0;
      const int expected_code = nearest_magnitude_code(grid, x) | sign;
      ASSERT_EQ(encode(f, x), expected_code) << name(f) << " x=" << x;
      ASSERT_EQ(encode(f, x, Overflow::standard), expected_code) << name(f) << " x=" << x;
    }
  }
}

TEST(LowpFormats, RelativeErrorWithinUnitRoundoffInTheNormalRange) {
  std::mt19937_64 rng(12);
  for (Format f : kElementFormats) {
    const FormatInfo& info = format_info(f);
    std::uniform_real_distribution<double> log2_magnitude(std::log2(info.min_normal),
                                                          std::log2(info.max_finite));
    double worst = 0;
    for (int i = 0; i < 1000000; ++i) {
      const float x = static_cast<float>(std::exp2(log2_magnitude(rng))) * ((i & 1) ? -1 : 1);
      const double error = std::fabs(decoded(f, x) - x) / std::fabs(x);
      worst = std::max(worst, error);
    }
    EXPECT_LE(worst, info.unit_roundoff) << info.name;
    // The bound is nearly reached: u / (1 + u) just above a power of two.
    EXPECT_GT(worst, info.unit_roundoff * 0.75) << info.name;
  }
}

TEST(LowpFormats, SaturationAndOverflow) {
  struct Case {
    Format f;
    float beyond;  // finite, beyond the largest finite value after rounding
    uint8_t max_code, standard_overflow, nan_code;
  };
  const Case cases[] = {{Format::e4m3, 465.0f, 0x7e, 0x7f, 0x7f},
                        {Format::e5m2, 61440.0f, 0x7b, 0x7c, 0x7e},
                        {Format::e2m1, 7.0f, 0x7, 0x7, 0x7}};
  for (const Case& c : cases) {
    const uint8_t sign = c.f == Format::e2m1 ? 0x8 : 0x80;
    for (float x : {c.beyond, 1e30f, kInf}) {
      EXPECT_EQ(encode(c.f, x, Overflow::saturate), c.max_code) << name(c.f) << " " << x;
      EXPECT_EQ(encode(c.f, -x, Overflow::saturate), c.max_code | sign) << name(c.f) << " " << x;
      EXPECT_EQ(encode(c.f, x, Overflow::standard), c.standard_overflow) << name(c.f) << " " << x;
      EXPECT_EQ(encode(c.f, -x, Overflow::standard), c.standard_overflow | sign) << name(c.f);
    }
    // NaN stays NaN (E2M1 has none: NaN gives +6, as CUDA's conversion does).
    for (Overflow o : kOverflows) {
      EXPECT_EQ(encode(c.f, kNaN, o), c.nan_code) << name(c.f);
      const uint8_t negative_nan = c.f == Format::e2m1 ? c.nan_code : c.nan_code | sign;
      EXPECT_EQ(encode(c.f, -kNaN, o), negative_nan) << name(c.f);
    }
  }
  // Just below the rounding threshold still rounds to the largest finite value in both modes;
  // the threshold itself is a tie: E4M3 464 goes to 448 (even), E5M2 61440 to Inf (even).
  EXPECT_EQ(encode(Format::e4m3, 464.0f, Overflow::standard), 0x7e);
  EXPECT_EQ(encode(Format::e4m3, std::nextafter(464.0f, kInf), Overflow::standard), 0x7f);
  EXPECT_EQ(encode(Format::e5m2, std::nextafter(61440.0f, 0.0f), Overflow::standard), 0x7b);
  EXPECT_TRUE(std::isinf(decode(Format::e5m2, encode(Format::e5m2, 61440.0f, Overflow::standard))));
}

TEST(LowpFormats, E8M0RoundsToPowersOfTwo) {
  const Format f = Format::e8m0;
  EXPECT_EQ(encode(f, 1.0f), 127);
  EXPECT_EQ(encode(f, 1.5f), 128);  // tie goes up
  EXPECT_EQ(encode(f, std::nextafter(1.5f, 0.0f)), 127);
  EXPECT_EQ(encode(f, 0.75f), 127);  // tie between 0.5 and 1 goes up
  EXPECT_EQ(encode(f, 3.0f), 129);
  EXPECT_EQ(encode(f, 0.1f), 124);  // 0.125
  EXPECT_EQ(encode(f, std::ldexp(1.0f, 127)), 254);
  EXPECT_EQ(encode(f, std::ldexp(1.5f, 127), Overflow::saturate), 254);
  EXPECT_EQ(encode(f, std::ldexp(1.5f, 127), Overflow::standard), 255);
  EXPECT_EQ(encode(f, kInf, Overflow::saturate), 254);
  EXPECT_EQ(encode(f, kInf, Overflow::standard), 255);
  for (Overflow o : kOverflows) EXPECT_EQ(encode(f, kNaN, o), 255);
  // No zero and no sign: saturating mode uses |x| and the smallest code; standard gives NaN.
  EXPECT_EQ(encode(f, 0.0f, Overflow::saturate), 0);
  EXPECT_EQ(encode(f, -4.0f, Overflow::saturate), 129);
  EXPECT_EQ(encode(f, 0.0f, Overflow::standard), 255);
  EXPECT_EQ(encode(f, -0.0f, Overflow::standard), 255);
  EXPECT_EQ(encode(f, -4.0f, Overflow::standard), 255);
  // FP32 subnormals (ml_dtypes' rule): up to 2^-127 give 2^-127, larger ones 2^-126.
  EXPECT_EQ(encode(f, std::ldexp(1.0f, -127)), 0);
  EXPECT_EQ(encode(f, std::ldexp(1.0f, -140)), 0);
  EXPECT_EQ(encode(f, std::nextafter(std::ldexp(1.0f, -127), 1.0f)), 1);
  EXPECT_EQ(encode(f, std::ldexp(1.0f, -126)), 1);
  // Normal inputs: 2^e, or 2^(e+1) from 1.5 * 2^e on.
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> log2_magnitude(-125.9, 126.9);
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>(std::exp2(log2_magnitude(rng)));
    const int e = std::ilogb(x);
    const int expected = x >= std::ldexp(1.5, e) ? e + 1 : e;
    ASSERT_EQ(decode(f, encode(f, x)), std::ldexp(1.0f, expected)) << x;
  }
}

TEST(LowpFormats, StochasticRoundingIsUnbiased) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const uint8_t code = encode_stochastic(Format::e2m1, 2.5f, counter_random(5, i));
    const float v = decode(Format::e2m1, code);
    ASSERT_TRUE(v == 2.0f || v == 3.0f) << v;
    sum += v;
  }
  EXPECT_NEAR(sum / n, 2.5, 0.01);
  // Other positions between grid points, subnormal ranges included: the mean is the input.
  struct Case {
    Format f;
    float x;
  };
  for (const Case& c : {Case{Format::e2m1, 0.1f}, Case{Format::e2m1, -4.6f},
                        Case{Format::e4m3, 1.0f + 0.3f * 0.125f}, Case{Format::e4m3, 0.0031f},
                        Case{Format::e5m2, 1e-5f}, Case{Format::e5m2, -300.0f}}) {
    const float lo = decode(c.f, encode_stochastic(c.f, c.x, 0));
    const float hi = decode(c.f, encode_stochastic(c.f, c.x, 0xffffffffu));
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const float v = decode(c.f, encode_stochastic(c.f, c.x, counter_random(6, i)));
      ASSERT_TRUE(v == lo || v == hi) << name(c.f) << " " << c.x << " gave " << v;
      total += v;
    }
    EXPECT_LT(std::fabs(lo), std::fabs(c.x));
    EXPECT_GT(std::fabs(hi), std::fabs(c.x));
    EXPECT_NEAR(total / n, c.x, 5 * std::fabs(hi - lo) / std::sqrt(4.0 * n)) << name(c.f);
  }
}

TEST(LowpFormats, StochasticRoundingBracketsAndKeepsGridPoints) {
  std::mt19937_64 rng(14);
  for (Format f : kElementFormats) {
    const auto grid = finite_grid(f);
    for (const auto& [value, code] : grid) {  // grid points never move
      EXPECT_EQ(encode_stochastic(f, static_cast<float>(value), 0xffffffffu), code);
      EXPECT_EQ(encode_stochastic(f, static_cast<float>(value), 0), code);
    }
    std::uniform_real_distribution<double> magnitude(0, grid.back().first);
    for (int i = 0; i < 100000; ++i) {
      const float x = static_cast<float>(magnitude(rng));
      const auto above = std::lower_bound(grid.begin(), grid.end(), std::make_pair(double{x}, -1));
      const double hi = above->first;
      const double lo = above->first == x ? x : std::prev(above)->first;
      const double v = decode(f, encode_stochastic(f, x, static_cast<uint32_t>(rng())));
      ASSERT_TRUE(v == lo || v == hi) << name(f) << " x=" << x << " gave " << v;
    }
    // Saturating mode never goes beyond the largest finite value.
    EXPECT_EQ(encode_stochastic(f, format_info(f).max_finite * 1.01f, 0xffffffffu),
              encode(f, format_info(f).max_finite));
  }
  EXPECT_THROW(encode_stochastic(Format::e8m0, 1.0f, 0), Error);
}

TEST(LowpFormats, CounterRandomIsAReproducibleUniformFunction) {
  EXPECT_EQ(counter_random(1, 2), counter_random(1, 2));
  EXPECT_NE(counter_random(1, 2), counter_random(2, 2));
  EXPECT_NE(counter_random(1, 2), counter_random(1, 3));
  EXPECT_NE(counter_random(0, 1), counter_random(1, 0));
  // Each bit is set about half the time.
  const int n = 200000;
  int ones[32] = {};
  for (int i = 0; i < n; ++i) {
    const uint32_t r = counter_random(42, i);
    for (int b = 0; b < 32; ++b) ones[b] += (r >> b) & 1;
  }
  for (int b = 0; b < 32; ++b) EXPECT_NEAR(ones[b] / double(n), 0.5, 0.01) << "bit " << b;
}

// ---- batch --------------------------------------------------------------------------------

// A mix that covers every path: random bit patterns (NaN, Inf, subnormals, huge), values around
// the format's range, exact ties, and +-0.
std::vector<float> mixed_inputs(Format f, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto grid = finite_grid(f);
  const double max_finite = grid.back().first;
  std::uniform_real_distribution<double> log2_magnitude(std::log2(grid[1].first) - 4,
                                                        std::log2(max_finite) + 2);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (rng() % 5) {
      case 0:
        x[i] = from_bits(static_cast<uint32_t>(rng()));
        break;
      case 1: {
        const size_t k = rng() % (grid.size() - 1);
        x[i] = static_cast<float>((grid[k].first + grid[k + 1].first) / 2);
        break;
      }
      case 2:
        x[i] = std::array<float, 6>{0.0f, -0.0f, kInf, -kInf, kNaN, -kNaN}[rng() % 6];
        break;
      default:
        x[i] = static_cast<float>(std::exp2(log2_magnitude(rng))) * ((rng() & 1) ? -1 : 1);
    }
  }
  return x;
}

uint8_t code_at(Format f, const std::vector<uint8_t>& out, size_t i) {
  return f == Format::e2m1 ? (out[i / 2] >> ((i & 1) * 4)) & 15 : out[i];
}

// Whether round-to-nearest-even with an unbounded exponent would carry |y| past max_finite:
// beyond max + ulp(max)/2, or exactly there when max's last mantissa bit is odd (the tie goes up).
bool rounds_past_max(Format f, double y) {
  const FormatInfo& info = format_info(f);
  const double max = info.max_finite;
  const double ulp = std::ldexp(1.0, int(std::floor(std::log2(max))) - info.mantissa_bits);
  const bool max_is_odd = std::fmod(max / ulp, 2.0) == 1.0;
  const double threshold = max + ulp / 2;
  return std::fabs(y) > threshold || (std::fabs(y) == threshold && max_is_odd);
}

EncodeStats direct_stats(Format f, const std::vector<float>& x, float multiplier) {
  EncodeStats s;
  for (float v : x) {
    if (!std::isnan(v)) s.amax = std::max(s.amax, std::fabs(v));
    const float y = v * multiplier;
    s.saturated += !std::isnan(y) && rounds_past_max(f, y);
  }
  return s;
}

TEST(LowpFormatsBatch, SaturationCountsOnlyValuesThatRoundPastTheLargestFiniteValue) {
  // Half a step above the largest value: E4M3 448 + 16 = 464 ties down to 448 (even mantissa);
  // E5M2 57344 + 4096 = 61440 ties up to 65536; E2M1 6 + 1 = 7 ties up to 8.
  const std::vector<float> e4m3 = {448.0f, 448.01f, 464.0f, std::nextafter(464.0f, 1e9f)};
  const std::vector<float> e5m2 = {57344.0f, 61439.0f, 61440.0f};
  const std::vector<float> e2m1 = {6.0f, 6.99f, 7.0f};
  std::vector<uint8_t> out(8);
  for (const auto& [f, x, expected] :
       {std::tuple{Format::e4m3, e4m3, 1}, std::tuple{Format::e5m2, e5m2, 1},
        std::tuple{Format::e2m1, e2m1, 1}}) {
    EncodeStats stats;
    encode_n(f, x.data(), int64_t(x.size()), 1.0f, out.data(), Overflow::saturate, &stats);
    EXPECT_EQ(stats.saturated, expected) << name(f);
  }
}

// Compares a batch encoder's formulation with the reference one for each format and overflow
// rule, on every upper half of the FP32 bit pattern (sign, exponent and the mantissa bits that
// decide rounding for every format here: the lowest is E4M3's bit 20) with lower halves that make
// ties exact, just below and just above, plus random ones: 2^16 x 8 patterns. differs(format,
// bits, saturate) returns a description of a mismatch, or an empty string.
template <class Differs>
void expect_every_upper_half_agrees(uint32_t seed, Differs&& differs) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> low(0, 0xffff);
  auto check = [&](auto format, const char* format_name) {
    for (bool saturate : {true, false}) {
      int64_t mismatches = 0;
      for (uint32_t hi = 0; hi < 0x10000; ++hi) {
        for (uint32_t lo : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, low(rng), low(rng)}) {
          const uint32_t bits = hi << 16 | lo;
          const std::string what = differs(format, bits, saturate, rng);
          if (!what.empty() && ++mismatches <= 5)
            ADD_FAILURE() << format_name << " bits 0x" << std::hex << bits << what << " saturate "
                          << saturate;
        }
      }
      EXPECT_EQ(mismatches, 0) << format_name;
    }
  };
  check(codec::E4M3{}, "e4m3");
  check(codec::E5M2{}, "e5m2");
  check(codec::E2M1{}, "e2m1");
}

TEST(LowpFormatsBatch, BatchRoundingFormulationMatchesTheReferenceOnEveryUpperHalf) {
  expect_every_upper_half_agrees(5, [](auto format, uint32_t bits, bool saturate, std::mt19937&) {
    using F = decltype(format);
    const bool same =
        codec::encode_rne_batch<F>(bits, saturate) == codec::encode_rne<F>(bits, saturate);
    return std::string(same ? "" : " (round to nearest)");
  });
}

// Stochastic rounding: each pattern with random bits at the edges of the round-up decision (none,
// all, the top bit alone or all but it) and three random ones.
TEST(LowpFormatsBatch, BatchStochasticFormulationMatchesTheReferenceOnEveryUpperHalf) {
  expect_every_upper_half_agrees(
      6, [](auto format, uint32_t bits, bool saturate, std::mt19937& rng) {
        using F = decltype(format);
        for (uint32_t random : {0u, ~0u, 0x80000000u, 0x7fffffffu, uint32_t(rng()), uint32_t(rng()),
                                uint32_t(rng())}) {
          if (codec::encode_stochastic_batch<F>(bits, random, saturate) !=
              codec::encode_stochastic<F>(bits, random, saturate)) {
            std::ostringstream what;
            what << " random 0x" << std::hex << random;
            return what.str();
          }
        }
        return std::string();
      });
}

TEST(LowpFormatsBatch, EncodeMatchesScalarBitForBit) {
  const size_t n = 1000001;  // odd: E2M1's last byte has one element
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 21 + static_cast<int>(f));
    for (float multiplier : {1.0f, 0.37f, 1024.0f, 0x1p-20f}) {
      for (Overflow o : kOverflows) {
        const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
        std::vector<uint8_t> out(bytes + 1, 0xab);
        EncodeStats stats;
        encode_n(f, x.data(), static_cast<int64_t>(n), multiplier, out.data(), o, &stats);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(code_at(f, out, i), encode(f, x[i] * multiplier, o))
              << name(f) << " x=" << x[i] << " m=" << multiplier << " i=" << i;
        }
        if (f == Format::e2m1) {
          EXPECT_EQ(out[bytes - 1] >> 4, 0) << "odd tail's high nibble";
        }
        EXPECT_EQ(out[bytes], 0xab) << "wrote past the end";
        const EncodeStats expected = direct_stats(f, x, multiplier);
        EXPECT_EQ(stats.amax, expected.amax) << name(f);
        EXPECT_EQ(stats.saturated, expected.saturated) << name(f);
        EXPECT_GT(expected.saturated, 0);
        // Counting only: the same codes and count, the amax left as it was.
        EncodeStats counted{.amax = -1.0f, .track_amax = false};
        std::vector<uint8_t> again(bytes + 1, 0xab);
        encode_n(f, x.data(), static_cast<int64_t>(n), multiplier, again.data(), o, &counted);
        EXPECT_EQ(again, out) << name(f);
        EXPECT_EQ(counted.saturated, expected.saturated) << name(f);
        EXPECT_EQ(counted.amax, -1.0f) << name(f);
      }
    }
  }
}

TEST(LowpFormatsBatch, StochasticMatchesScalarAndIsSplitInvariant) {
  const size_t n = 100003;
  const uint64_t seed = 77, first_index = 1000;
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 31 + static_cast<int>(f));
    for (Overflow o : kOverflows) {
      const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
      std::vector<uint8_t> out(bytes);
      EncodeStats stats;
      encode_stochastic_n(f, x.data(), static_cast<int64_t>(n), 3.0f, seed, first_index, out.data(),
                          o, &stats);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t random = counter_random(seed, first_index + i);
        ASSERT_EQ(code_at(f, out, i), encode_stochastic(f, x[i] * 3.0f, random, o))
            << name(f) << " i=" << i;
      }
      const EncodeStats expected = direct_stats(f, x, 3.0f);
      EXPECT_EQ(stats.amax, expected.amax);
      EXPECT_EQ(stats.saturated, expected.saturated);
      // Two halves encoded separately (even split: E2M1 bytes stay whole) give the same codes.
      const size_t half = 50000;
      std::vector<uint8_t> split(bytes);
      const size_t half_bytes = f == Format::e2m1 ? half / 2 : half;
      encode_stochastic_n(f, x.data(), half, 3.0f, seed, first_index, split.data(), o);
      encode_stochastic_n(f, x.data() + half, static_cast<int64_t>(n - half), 3.0f, seed,
                          first_index + half, split.data() + half_bytes, o);
      EXPECT_EQ(split, out) << name(f);
    }
  }
}

// The strided form draws element i's bits at first_index + i * stride (the transposed quantizer's
// indices), the rest as encode_stochastic_n.
TEST(LowpFormatsBatch, StridedStochasticDrawsAtTheStridedIndices) {
  const size_t n = 1001;
  const uint64_t seed = 78, first_index = 5000, stride = 688;
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 41 + static_cast<int>(f));
    const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
    std::vector<uint8_t> out(bytes);
    EncodeStats stats;
    encode_stochastic_strided_n(f, x.data(), static_cast<int64_t>(n), 3.0f, seed, first_index,
                                stride, out.data(), Overflow::saturate, &stats);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t random = counter_random(seed, first_index + i * stride);
      ASSERT_EQ(code_at(f, out, i), encode_stochastic(f, x[i] * 3.0f, random, Overflow::saturate))
          << name(f) << " i=" << i;
    }
    EXPECT_EQ(stats.saturated, direct_stats(f, x, 3.0f).saturated) << name(f);
  }
}

TEST(LowpFormatsBatch, StatsAccumulateAcrossCalls) {
  const std::vector<float> a = {1.0f, -500.0f, kNaN, 2.0f};
  const std::vector<float> b = {-3.0f, 1000.0f, kInf, 0.5f};
  std::vector<uint8_t> out(4);
  EncodeStats stats;
  encode_n(Format::e4m3, a.data(), 4, 1.0f, out.data(), Overflow::saturate, &stats);
  EXPECT_EQ(stats.amax, 500.0f);  // NaN ignored
  EXPECT_EQ(stats.saturated, 1);  // -500; NaN is not counted
  encode_n(Format::e4m3, b.data(), 4, 0.25f, out.data(), Overflow::saturate, &stats);
  EXPECT_EQ(stats.amax, kInf);    // amax before scaling
  EXPECT_EQ(stats.saturated, 2);  // 1000 * 0.25 = 250 fits; Inf does not
  encode_n(Format::e4m3, a.data(), 0, 1.0f, out.data(), Overflow::saturate, &stats);
  EXPECT_EQ(stats.saturated, 2);
  EXPECT_THROW(encode_n(Format::e8m0, a.data(), 4, 1.0f, out.data()), Error);
}

TEST(LowpFormatsBatch, PackedE2M1Layout) {
  const std::vector<float> x = {0.5f, -6.0f, 1.0f, 3.0f, -0.5f};
  std::vector<uint8_t> out(3, 0xff);
  encode_n(Format::e2m1, x.data(), 5, 1.0f, out.data());
  EXPECT_EQ(out[0], 0xf1);  // element 0 (0.5 = 0x1) low, element 1 (-6 = 0xf) high
  EXPECT_EQ(out[1], 0x52);  // 1.0 = 0x2, 3.0 = 0x5
  EXPECT_EQ(out[2], 0x09);  // -0.5 = 0x9, high nibble 0
  std::vector<float> back(5);
  decode_n(Format::e2m1, out.data(), 5, 2.0f, back.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(back[i], 2.0f * x[i]);
}

TEST(LowpFormatsBatch, DecodeMatchesScalar) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (Format f : kAllFormats) {
    const int64_t n = f == Format::e2m1 ? 512 : 256;
    std::vector<float> out(n);
    decode_n(f, codes.data(), n, 0.5f, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t code = f == Format::e2m1 ? (codes[i / 2] >> ((i & 1) * 4)) & 15 : codes[i];
      EXPECT_TRUE(same_bits_or_nan(out[i], decode(f, code) * 0.5f)) << name(f) << " " << i;
    }
  }
}

// decode_bf16_n against the scalar decode: every code, one multiplier per block (1, powers of
// two, E4M3 scale values), each result exactly the FP32 product (the products are bf16 numbers)
// and NaN codes NaN. Blocks of 16 (NVFP4), 32 (MX), 48 (two blocks within one group of 32 of
// the AVX512BW path) and 64 (a block that path leaves half done), a ragged last block, and
// inputs shorter than one group; through decode_bf16_n (the AVX512BW path where the CPU has it)
// and decode_bf16_n_portable (the loops every other CPU runs).
TEST(LowpFormatsBatch, DecodeBf16MatchesScalarForEveryCodeAndBlockScale) {
  const std::vector<float> kMultipliers = {1.0f, 0.125f, 0x1p-100f, 0x1p20f, 0.8125f, 448.0f, 3.0f};
  std::vector<uint8_t> every_code(256);
  for (int c = 0; c < 256; ++c) every_code[size_t(c)] = static_cast<uint8_t>(c);
  for (auto* decode_bf16 : {&decode_bf16_n, &decode_bf16_n_portable})
    for (Format f : {Format::e4m3, Format::e5m2, Format::e2m1})
      for (int64_t n : {f == Format::e2m1 ? int64_t(512 - 6) : int64_t(256 - 3), int64_t(27)})
        for (int64_t block : {int64_t(16), int64_t(32), int64_t(48), int64_t(64), n + n % 2}) {
          std::vector<float> multipliers(size_t((n + block - 1) / block));
          for (size_t b = 0; b < multipliers.size(); ++b)
            multipliers[b] = kMultipliers[b % kMultipliers.size()];
          for (const float* m : std::array<const float*, 2>{nullptr, multipliers.data()}) {
            std::vector<uint16_t> out(size_t(n), 0xdead);
            decode_bf16(f, every_code.data(), n, block, m, out.data());
            for (int64_t i = 0; i < n; ++i) {
              const uint8_t code = f == Format::e2m1
                                       ? (every_code[size_t(i / 2)] >> ((i & 1) * 4)) & 15
                                       : every_code[size_t(i)];
              const float expected = decode(f, code) * (m == nullptr ? 1.0f : m[i / block]);
              const float got = std::bit_cast<float>(uint32_t(out[size_t(i)]) << 16);
              EXPECT_TRUE(same_bits_or_nan(got, expected))
                  << (decode_bf16 == &decode_bf16_n ? "" : "portable ") << name(f) << " n " << n
                  << " code " << int(code) << " block " << block << " multiplier "
                  << (m == nullptr ? 1.0f : m[i / block]) << ": " << got << " vs " << expected;
            }
          }
        }
  std::vector<uint16_t> out(4);
  const uint8_t codes[2] = {0x21, 0x43};
  const float odd_block = 1.0f;
  EXPECT_THROW(decode_bf16_n(Format::e2m1, codes, 4, 3, &odd_block, out.data()), Error);
}

}  // namespace
}  // namespace h2::lowp
