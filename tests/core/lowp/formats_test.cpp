// Tests of the low-precision element formats (core/lowp/formats.h) against independent
// references (format_reference.h): decoded values from the textbook formula in double, rounding
// against a brute-force nearest-value search, the examples of FORMATS.md, and the batch decoders
// against the scalar reference. The batch encoders: encode_batch_test.cpp.
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
#include "tests/core/lowp/format_reference.h"

namespace h2::lowp {
namespace {

using namespace testing;

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

bool same_bits_or_nan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
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

// decode_n against the scalar decode times the multiplier: every code, every length up to 40,
// NaN codes NaN with their sign, nothing written past n.
TEST(LowpFormatsBatch, DecodeMatchesScalar) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (Format f : kAllFormats) {
    const int64_t every_code = f == Format::e2m1 ? 512 : 256;
    for (float multiplier : {0.5f, -3.0f}) {
      for (int64_t n = 0; n <= every_code; n += n < 40 ? 1 : every_code - 40) {
        std::vector<float> out(size_t(n) + 1, 123.0f);
        decode_n(f, codes.data(), n, multiplier, out.data());
        for (int64_t i = 0; i < n; ++i) {
          const uint8_t code = f == Format::e2m1 ? (codes[i / 2] >> ((i & 1) * 4)) & 15 : codes[i];
          const float expected = decode(f, code) * multiplier;
          ASSERT_TRUE(same_bits_or_nan(out[i], expected)) << name(f) << " n=" << n << " i=" << i;
          ASSERT_EQ(std::signbit(out[i]), std::signbit(expected)) << name(f) << " i=" << i;
        }
        EXPECT_EQ(out[size_t(n)], 123.0f) << name(f) << " wrote past n=" << n;
      }
    }
  }
}

// decode_blocks_n against the scalar decode times each block's multiplier: every code, blocks of
// whole 8-element steps (8, 16, 32: the AVX2 path where the CPU has it) and others (2, 6, 12:
// the table), one block for all, lengths with every tail, multipliers of both signs and Inf,
// NaN codes NaN with their sign, nothing written past n.
TEST(LowpFormatsBatch, DecodeBlocksMatchesScalarForEveryCodeAndBlock) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(255 - c);
  for (Format f : kElementFormats) {
    const int64_t every_code = f == Format::e2m1 ? 512 : 256;
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(8), int64_t(15), int64_t(30), every_code}) {
      for (int64_t block :
           {int64_t(2), int64_t(6), int64_t(8), int64_t(12), int64_t(16), int64_t(32), n}) {
        std::vector<float> multipliers(size_t((n + block - 1) / block));
        for (size_t b = 0; b < multipliers.size(); ++b)
          multipliers[b] = b % 5 == 4 ? kInf : std::ldexp(b % 2 ? -1.5f : 1.0f, int(b % 7) - 3);
        std::vector<float> out(size_t(n) + 1, 123.0f);
        decode_blocks_n(f, codes.data(), n, block, multipliers.data(), out.data());
        for (int64_t i = 0; i < n; ++i) {
          const uint8_t code = f == Format::e2m1 ? (codes[i / 2] >> ((i & 1) * 4)) & 15 : codes[i];
          const float expected = decode(f, code) * multipliers[size_t(i / block)];
          ASSERT_TRUE(same_bits_or_nan(out[i], expected))
              << name(f) << " n=" << n << " block " << block << " i=" << i;
          ASSERT_EQ(std::signbit(out[i]), std::signbit(expected)) << name(f) << " i=" << i;
        }
        EXPECT_EQ(out[size_t(n)], 123.0f) << name(f) << " wrote past n=" << n;
      }
    }
  }
  const float one = 1.0f;
  float out = 0;
  EXPECT_THROW(decode_blocks_n(Format::e4m3, codes.data(), 1, 0, &one, &out), Error);
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
