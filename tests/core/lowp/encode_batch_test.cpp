// Tests of the batch encoders (core/lowp/formats.h's encode_*_n, encode_batch.cpp,
// encode_avx512.cpp and encode_avx2.cpp) against the scalar reference bit for bit, on both paths
// (the fastest this CPU has, which the capped reruns of this suite make the AVX2 one, and the
// portable loops every CPU runs), and each vector path's lanes directly: every upper half of the
// FP32 pattern through each formulation, 10^6 mixed inputs, every short length, stochastic indices,
// per-block multipliers and bf16 values, and saturation counts against the rule computed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/lowp/encode_avx2.h"
#include "core/lowp/encode_avx512.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/formats.h"
#include "tests/core/lowp/format_reference.h"

namespace h2::lowp {
namespace {

using namespace testing;
using testing::name;  // overloaded below for the paths

constexpr EncodePath kEncodePaths[] = {EncodePath::fastest, EncodePath::portable};

const char* name(EncodePath path) {
  return path == EncodePath::fastest ? "fastest path" : "portable path";
}

TEST(LowpEncodeBatch, SaturationCountsOnlyValuesThatRoundPastTheLargestFiniteValue) {
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

TEST(LowpEncodeBatch, BatchRoundingFormulationMatchesTheReferenceOnEveryUpperHalf) {
  expect_every_upper_half_agrees(5, [](auto format, uint32_t bits, bool saturate, std::mt19937&) {
    using F = decltype(format);
    const bool same =
        codec::encode_rne_batch<F>(bits, saturate) == codec::encode_rne<F>(bits, saturate);
    return std::string(same ? "" : " (round to nearest)");
  });
}

// Stochastic rounding: each pattern with random bits at the edges of the round-up decision (none,
// all, the top bit alone or all but it) and three random ones.
TEST(LowpEncodeBatch, BatchStochasticFormulationMatchesTheReferenceOnEveryUpperHalf) {
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

// A vector path's lanes (`lanes`: encode_lanes_avx512 or encode_lanes_avx2) against the
// reference on the same patterns and random bits as the two tests above.
using EncodeLanes = void (*)(Format, const uint32_t*, const uint32_t*, int64_t, bool, uint8_t*);
void expect_lanes_match_the_reference(EncodeLanes lanes) {
  expect_every_upper_half_agrees(
      7, [lanes](auto format, uint32_t bits, bool saturate, std::mt19937& rng) {
        using F = decltype(format);
        const Format f = std::is_same_v<F, codec::E4M3>   ? Format::e4m3
                         : std::is_same_v<F, codec::E5M2> ? Format::e5m2
                                                          : Format::e2m1;
        uint8_t code = 0;
        lanes(f, &bits, nullptr, 1, saturate, &code);
        if (code != codec::encode_rne<F>(bits, saturate)) return std::string(" (round to nearest)");
        const std::array<uint32_t, 7> randoms = {
            0u, ~0u, 0x80000000u, 0x7fffffffu, uint32_t(rng()), uint32_t(rng()), uint32_t(rng())};
        const std::array<uint32_t, 7> patterns = {bits, bits, bits, bits, bits, bits, bits};
        std::array<uint8_t, 7> codes{};
        lanes(f, patterns.data(), randoms.data(), 7, saturate, codes.data());
        for (size_t j = 0; j < randoms.size(); ++j) {
          if (codes[j] != codec::encode_stochastic<F>(bits, randoms[j], saturate)) {
            std::ostringstream what;
            what << " random 0x" << std::hex << randoms[j];
            return what.str();
          }
        }
        return std::string();
      });
}

TEST(LowpEncodeBatch, Avx512LanesMatchTheReferenceOnEveryUpperHalf) {
  if (!detail::avx512_encoders_available()) GTEST_SKIP() << "this CPU lacks AVX512F/BW/DQ/VL";
  expect_lanes_match_the_reference(detail::encode_lanes_avx512);
}

TEST(LowpEncodeBatch, Avx2LanesMatchTheReferenceOnEveryUpperHalf) {
  if (!detail::avx2_encoders_available()) GTEST_SKIP() << "this CPU lacks AVX2";
  expect_lanes_match_the_reference(detail::encode_lanes_avx2);
}

// Every length up to three 16-lane steps, on both paths, with a positive, a negative and an
// infinite multiplier: the codes of a partial last step and nothing written past the end (E2M1:
// an odd length's last high nibble 0, though the padding lanes' products are -0 or NaN there).
TEST(LowpEncodeBatch, EveryShortLengthEncodesAndStopsAtTheEnd) {
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, 48, 51 + static_cast<int>(f));
    for (EncodePath path : kEncodePaths) {
      for (float m : {2.0f, -2.0f, kInf}) {
        for (size_t n = 0; n <= x.size(); ++n) {
          for (bool stochastic : {false, true}) {
            SCOPED_TRACE(::testing::Message() << name(f) << " " << name(path) << " m=" << m
                                              << " n=" << n << " stochastic " << stochastic);
            const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
            std::vector<uint8_t> out(bytes + 2, 0xab);
            if (stochastic) {
              encode_stochastic_n(f, x.data(), int64_t(n), m, 9, 100, out.data(),
                                  Overflow::saturate, nullptr, path);
            } else {
              encode_n(f, x.data(), int64_t(n), m, out.data(), Overflow::saturate, nullptr, path);
            }
            for (size_t i = 0; i < n; ++i) {
              const uint8_t expected =
                  stochastic ? encode_stochastic(f, x[i] * m, counter_random(9, 100 + i))
                             : encode(f, x[i] * m);
              ASSERT_EQ(code_at(f, out, i), expected) << "i=" << i;
            }
            if (f == Format::e2m1 && n % 2 == 1) {
              EXPECT_EQ(out[bytes - 1] >> 4, 0) << "odd tail's high nibble";
            }
            EXPECT_EQ(out[bytes], 0xab);
            EXPECT_EQ(out[bytes + 1], 0xab);
          }
        }
      }
    }
  }
}

// Each vector path this CPU has (detail::encode_avx512, detail::encode_avx2), called directly,
// against the portable loops on the same run: codes, saturation count and amax, for FP32 and
// bf16 values, one multiplier per value, blocks of a path's step and longer with boundaries on
// and inside steps (whatever the build's -march, so also where the capped reruns cannot run),
// one block for all, both roundings, lengths around the steps and a long odd one. Multipliers of
// both signs, in an array exactly as long as the blocks need.
TEST(LowpEncodeBatch, VectorPathsMatchThePortableLoops) {
  using VectorPath = detail::EncodeTotals (*)(Format, const detail::EncodeRun&);
  std::vector<std::pair<const char*, VectorPath>> paths;
  if (detail::avx512_encoders_available()) paths.emplace_back("avx512", detail::encode_avx512);
  if (detail::avx2_encoders_available()) paths.emplace_back("avx2", detail::encode_avx2);
  if (paths.empty()) GTEST_SKIP() << "this CPU has no vector encoders";
  std::mt19937 rng(11);
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, 1013, 71 + static_cast<int>(f));
    std::vector<uint16_t> x_bf16(x.size());
    for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = uint16_t(std::bit_cast<uint32_t>(x[i]) >> 16);
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 1013}) {
      for (int64_t block : {int64_t(1), int64_t(8), int64_t(9), int64_t(12), int64_t(16),
                            int64_t(17), int64_t(100), n}) {
        std::vector<float> multipliers(size_t((n + block - 1) / block));
        for (float& m : multipliers)
          m = std::ldexp(rng() % 2 ? -1.0f : 1.0f, int(rng() % 9) - 4) * (1 + float(rng() % 7));
        for (bool bf16 : {false, true}) {
          for (bool stochastic : {false, true}) {
            const detail::EncodeRun run{.in = bf16 ? static_cast<const void*>(x_bf16.data())
                                                   : static_cast<const void*>(x.data()),
                                        .bf16 = bf16,
                                        .n = n,
                                        .multipliers = multipliers.data(),
                                        .block = block,
                                        .saturate = n % 2 == 0,
                                        .stochastic = stochastic,
                                        .key = codec::random_key(5),
                                        .first_index = 40,
                                        .index_stride = 3,
                                        .track_amax = true};
            const ScaledValues in{.values = run.in,
                                  .bf16 = bf16,
                                  .n = n,
                                  .multipliers = multipliers.data(),
                                  .block = block};
            const Overflow o = run.saturate ? Overflow::saturate : Overflow::standard;
            const size_t bytes = size_t(f == Format::e2m1 ? (n + 1) / 2 : n);
            std::vector<uint8_t> expected(bytes + 1, 0xab);
            EncodeStats expected_stats;
            if (stochastic) {
              encode_scaled_stochastic_n(f, in, 5, 40, 3, expected.data(), o, &expected_stats,
                                         EncodePath::portable);
            } else {
              encode_scaled_n(f, in, expected.data(), o, &expected_stats, EncodePath::portable);
            }
            for (const auto& [path_name, encode] : paths) {
              if (path_name == std::string("avx512") ? !detail::avx512_takes(run)
                                                     : !detail::avx2_takes(run))
                continue;
              SCOPED_TRACE(::testing::Message()
                           << path_name << " " << name(f) << " n=" << n << " block " << block
                           << " bf16 " << bf16 << " stochastic " << stochastic);
              std::vector<uint8_t> out(bytes + 1, 0xab);
              detail::EncodeRun into = run;
              into.out = out.data();
              const detail::EncodeTotals totals = encode(f, into);
              ASSERT_EQ(out, expected);
              EXPECT_EQ(totals.saturated, expected_stats.saturated);
              EXPECT_EQ(std::bit_cast<float>(totals.amax_bits), expected_stats.amax);
            }
          }
        }
      }
    }
  }
}

TEST(LowpEncodeBatch, EncodeMatchesScalarBitForBit) {
  const size_t n = 1000001;  // odd: E2M1's last byte has one element
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 21 + static_cast<int>(f));
    for (auto [multiplier, o, path] : std::vector<std::tuple<float, Overflow, EncodePath>>{
             {1.0f, Overflow::saturate, EncodePath::fastest},
             {0.37f, Overflow::standard, EncodePath::fastest},
             {1024.0f, Overflow::saturate, EncodePath::portable},
             {0x1p-20f, Overflow::standard, EncodePath::portable},
             {1024.0f, Overflow::standard, EncodePath::fastest},
             {0x1p-20f, Overflow::saturate, EncodePath::fastest},
             {1.0f, Overflow::standard, EncodePath::portable},
             {0.37f, Overflow::saturate, EncodePath::portable}}) {
      SCOPED_TRACE(name(path));
      {
        const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
        std::vector<uint8_t> out(bytes + 1, 0xab);
        EncodeStats stats;
        encode_n(f, x.data(), static_cast<int64_t>(n), multiplier, out.data(), o, &stats, path);
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
        encode_n(f, x.data(), static_cast<int64_t>(n), multiplier, again.data(), o, &counted, path);
        EXPECT_EQ(again, out) << name(f);
        EXPECT_EQ(counted.saturated, expected.saturated) << name(f);
        EXPECT_EQ(counted.amax, -1.0f) << name(f);
      }
    }
  }
}

TEST(LowpEncodeBatch, StochasticMatchesScalarAndIsSplitInvariant) {
  const size_t n = 100003;
  const uint64_t seed = 77, first_index = 1000;
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 31 + static_cast<int>(f));
    for (auto [o, path] : {std::pair{Overflow::saturate, EncodePath::fastest},
                           std::pair{Overflow::standard, EncodePath::fastest},
                           std::pair{Overflow::saturate, EncodePath::portable},
                           std::pair{Overflow::standard, EncodePath::portable}}) {
      SCOPED_TRACE(name(path));
      const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
      std::vector<uint8_t> out(bytes);
      EncodeStats stats;
      encode_stochastic_n(f, x.data(), static_cast<int64_t>(n), 3.0f, seed, first_index, out.data(),
                          o, &stats, path);
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
      encode_stochastic_n(f, x.data(), half, 3.0f, seed, first_index, split.data(), o, nullptr,
                          path);
      encode_stochastic_n(f, x.data() + half, static_cast<int64_t>(n - half), 3.0f, seed,
                          first_index + half, split.data() + half_bytes, o, nullptr, path);
      EXPECT_EQ(split, out) << name(f);
    }
  }
}

// The strided form draws element i's bits at first_index + i * stride (the transposed quantizer's
// indices), the rest as encode_stochastic_n.
TEST(LowpEncodeBatch, StridedStochasticDrawsAtTheStridedIndices) {
  const size_t n = 1001;
  const uint64_t seed = 78, first_index = 5000, stride = 688;
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 41 + static_cast<int>(f));
    const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
    for (EncodePath path : kEncodePaths) {
      std::vector<uint8_t> out(bytes);
      EncodeStats stats;
      encode_stochastic_strided_n(f, x.data(), static_cast<int64_t>(n), 3.0f, seed, first_index,
                                  stride, out.data(), Overflow::saturate, &stats, path);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t random = counter_random(seed, first_index + i * stride);
        ASSERT_EQ(code_at(f, out, i), encode_stochastic(f, x[i] * 3.0f, random, Overflow::saturate))
            << name(f) << " " << name(path) << " i=" << i;
      }
      EXPECT_EQ(stats.saturated, direct_stats(f, x, 3.0f).saturated) << name(f) << name(path);
    }
  }
}

// encode_scaled_n and encode_scaled_stochastic_n against the scalar reference of each value times
// its block's multiplier: FP32 and bf16 values, one multiplier per value (1), blocks of whole
// steps (8, 16, 24 and 48 for AVX2's 8 values; 16 and 48 for AVX-512's 16), blocks whose
// boundaries fall inside a step (9, 12, 17, 100; and 24 for AVX-512; 12 is too short for the
// AVX-512 path and taken by the AVX2 one) and one multiplier for all, on both paths; an odd
// length.
TEST(LowpEncodeBatch, ScaledEncodesMatchTheReferenceOfEachProduct) {
  const size_t n = 1001;
  const uint64_t seed = 79, first_index = 300, stride = 7;
  for (Format f : kElementFormats) {
    const auto x = mixed_inputs(f, n, 61 + static_cast<int>(f));
    std::vector<uint16_t> x_bf16(n);
    std::vector<float> x_bf16_values(n);  // the bf16 values, exactly
    for (size_t i = 0; i < n; ++i) {
      x_bf16[i] = uint16_t(std::bit_cast<uint32_t>(x[i]) >> 16);
      x_bf16_values[i] = std::bit_cast<float>(uint32_t(x_bf16[i]) << 16);
    }
    std::mt19937 rng(7);
    std::vector<float> multipliers(n);
    for (float& m : multipliers)
      m = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 9) - 4);
    const size_t bytes = f == Format::e2m1 ? (n + 1) / 2 : n;
    for (EncodePath path : kEncodePaths) {
      for (bool bf16 : {false, true}) {
        const std::vector<float>& values = bf16 ? x_bf16_values : x;
        for (int64_t block : {0, 1, 8, 9, 12, 16, 17, 24, 48, 100}) {
          for (bool stochastic : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << name(f) << " " << name(path) << " bf16 " << bf16 << " block " << block
                         << " stochastic " << stochastic);
            const ScaledValues in{
                .values = bf16 ? static_cast<const void*>(x_bf16.data()) : x.data(),
                .bf16 = bf16,
                .n = int64_t(n),
                .multipliers = block > 0 ? multipliers.data() : nullptr,
                .block = block};
            std::vector<uint8_t> out(bytes + 1, 0xab);
            EncodeStats stats;
            if (stochastic) {
              encode_scaled_stochastic_n(f, in, seed, first_index, stride, out.data(),
                                         Overflow::standard, &stats, path);
            } else {
              encode_scaled_n(f, in, out.data(), Overflow::standard, &stats, path);
            }
            EncodeStats expected;
            for (size_t i = 0; i < n; ++i) {
              const float y = values[i] * (block > 0 ? multipliers[i / size_t(block)] : 1.0f);
              const uint8_t code =
                  stochastic
                      ? encode_stochastic(f, y, counter_random(seed, first_index + i * stride),
                                          Overflow::standard)
                      : encode(f, y, Overflow::standard);
              ASSERT_EQ(code_at(f, out, i), code) << "i=" << i << " y=" << y;
              if (!std::isnan(values[i]))
                expected.amax = std::max(expected.amax, std::fabs(values[i]));
              expected.saturated += !std::isnan(y) && rounds_past_max(f, y);
            }
            EXPECT_EQ(out[bytes], 0xab) << "wrote past the end";
            EXPECT_EQ(stats.amax, expected.amax);
            EXPECT_EQ(stats.saturated, expected.saturated);
            EXPECT_GT(expected.saturated, 0);
          }
        }
      }
    }
  }
  const float one = 1.0f;
  const ScaledValues no_block{.values = &one, .n = 1, .multipliers = &one, .block = 0};
  uint8_t code = 0;
  EXPECT_THROW(encode_scaled_n(Format::e4m3, no_block, &code), Error);
}

TEST(LowpEncodeBatch, StatsAccumulateAcrossCalls) {
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

TEST(LowpEncodeBatch, PackedE2M1Layout) {
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

}  // namespace
}  // namespace h2::lowp
