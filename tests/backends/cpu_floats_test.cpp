// cpu_floats.h's bulk conversions against core/half_float.h's scalars, bit for bit, as built for
// the kernels' -march. bf16 narrowing (bf16_narrow.h), AVX-512 where the CPU has it, AVX2 for
// what it leaves (8 to 15 values) and throughout under H2_CPU_MAX_ISA=avx2 (this test's capped
// run), each width also called directly: over every upper half of the f32 bit pattern (sign,
// exponent, the mantissa bits bf16 keeps; NaN and infinity among them) with the lower halves that
// decide the rounding, cut into lengths that leave every tail. bf16 widening over every pattern.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels/bf16_narrow.h"
#include "backends/cpu/kernels/cpu_floats.h"
#include "core/cpu_features.h"
#include "core/half_float.h"

namespace h2::cpu {
namespace {

// Every upper half with lower halves 0, 1, just below the tie, the tie, just above, the largest.
std::vector<float> rounding_patterns() {
  std::vector<float> values;
  for (uint32_t upper = 0; upper < 0x10000u; ++upper)
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      values.push_back(std::bit_cast<float>(upper << 16 | lower));
  return values;
}

// The values f32_to_bf16 disagrees with in `got`, the first few reported.
int64_t count_wrong(const std::vector<float>& values, const std::vector<bf16_t>& got) {
  int64_t wrong = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t want = f32_to_bf16(values[i]);
    if (got[i].bits != want && wrong++ < 8)
      ADD_FAILURE() << "f32 bits 0x" << std::hex << std::bit_cast<uint32_t>(values[i])
                    << " gave bf16 0x" << got[i].bits << ", the scalar 0x" << want;
  }
  return wrong;
}

TEST(CpuFloats, Bf16NarrowingMatchesTheScalarBitForBit) {
  const std::vector<float> values = rounding_patterns();
  std::vector<bf16_t> got(values.size());
  // Pieces of 1 to 72 values: every tail length past pairs of vectors and a single one, and
  // vectors at every alignment.
  for (size_t at = 0, n = 1; at < values.size(); at += n, n = n % 72 + 1)
    from_floats(values.data() + at, int64_t(std::min(n, values.size() - at)), got.data() + at);
  EXPECT_EQ(count_wrong(values, got), 0) << "AVX-512 " << (cpu_has_avx512bw() ? "used" : "not used")
                                         << ", AVX2 " << (cpu_has_avx2() ? "used" : "not used");
}

TEST(CpuFloats, Avx2NarrowingMatchesTheScalarBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 here (or H2_CPU_MAX_ISA hides it)";
  const std::vector<float> values = rounding_patterns();
  std::vector<bf16_t> got(values.size());
  // Pieces of 1 to 40 values; the vector kernel alone, the scalar for what it leaves.
  for (size_t at = 0, n = 1; at < values.size(); at += n, n = n % 40 + 1) {
    const int64_t piece = int64_t(std::min(n, values.size() - at));
    const int64_t done = from_floats_avx2(values.data() + at, piece, got.data() + at);
    EXPECT_EQ(done, piece / 8 * 8) << piece;
    for (int64_t i = done; i < piece; ++i) got[at + i].bits = f32_to_bf16(values[at + i]);
  }
  EXPECT_EQ(count_wrong(values, got), 0);
}

TEST(CpuFloats, Avx2NarrowingDoesWholeVectorsOnly) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 here (or H2_CPU_MAX_ISA hides it)";
  std::vector<float> values(29);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + float(i) * 0x1p-9f;  // ties too
  std::vector<bf16_t> got(values.size(), bf16_t{0xabcd});
  // A pair of vectors, then one: 24 of 29.
  EXPECT_EQ(from_floats_avx2(values.data(), int64_t(values.size()), got.data()), 24);
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(got[i].bits, f32_to_bf16(values[i])) << i;
  for (size_t i = 24; i < values.size(); ++i) EXPECT_EQ(got[i].bits, 0xabcd) << i;
  EXPECT_EQ(from_floats_avx2(values.data(), 7, got.data()), 0);
}

TEST(CpuFloats, Avx512NarrowingDoesWholeVectorsOnly) {
  if (!cpu_has_avx512bw()) GTEST_SKIP() << "no AVX512F/BW here (or H2_CPU_MAX_ISA hides them)";
  std::vector<float> values(51);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + float(i) * 0x1p-9f;  // ties too
  std::vector<bf16_t> got(values.size(), bf16_t{0xabcd});
  // Pairs of vectors, then one: 48 of 51.
  EXPECT_EQ(from_floats_avx512(values.data(), int64_t(values.size()), got.data()), 48);
  for (size_t i = 0; i < 48; ++i) EXPECT_EQ(got[i].bits, f32_to_bf16(values[i])) << i;
  for (size_t i = 48; i < values.size(); ++i) EXPECT_EQ(got[i].bits, 0xabcd) << i;
  EXPECT_EQ(from_floats_avx512(values.data(), 31, got.data()), 16);
  EXPECT_EQ(from_floats_avx512(values.data(), 15, got.data()), 0);
}

TEST(CpuFloats, Bf16WideningIsExactForEveryPattern) {
  std::vector<bf16_t> all(0x10000);
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) all[bits].bits = uint16_t(bits);
  std::vector<float> got(all.size());
  to_floats(all.data(), int64_t(all.size()), got.data());
  for (uint32_t bits = 0; bits < 0x10000u; ++bits)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[bits]), bits << 16) << std::hex << bits;
}

}  // namespace
}  // namespace h2::cpu
