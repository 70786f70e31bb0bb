// backends/cpu/kernels/bf16_amaxes.h against the definitions written out: the largest |x| of
// each column over a band's rows (and the portable loop the column maxima fall back to), and of
// each 16-value segment of a row; compared as values, NaN ignored (all NaN gives 0), Inf
// counted. Random bit patterns (every class: NaN with either sign, Inf, subnormals, zeros of
// both signs), for widths across the 32-lane and 256-column boundaries and a row stride wider
// than the band, and segment counts on both sides of the groups of 16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels/bf16_amaxes.h"
#include "backends/cpu/kernels/quantize_rows.h"

namespace h2::cpu {
namespace {

float value_of(uint16_t bits) {
  return bf16_to_f32(bits);
}

TEST(Bf16Amaxes, EachColumnGetsItsLargestMagnitudeWithNaNIgnored) {
  std::mt19937 rng(11);
  for (const int64_t w : {1, 31, 32, 33, 255, 256, 257, 300}) {
    for (const int64_t rows : {1, 2, 16, 19}) {
      const int64_t ld = w + 7;
      std::vector<bf16_t> x(size_t(rows * ld));
      for (bf16_t& v : x) v.bits = uint16_t(rng());
      // Column 0 all NaN; column w - 1 (where w > 1) holds -Inf in its last row.
      for (int64_t k = 0; k < rows; ++k) x[size_t(k * ld)].bits = k % 2 ? 0xffc1 : 0x7fa0;
      if (w > 1) x[size_t((rows - 1) * ld + w - 1)].bits = 0xff80;
      std::vector<uint16_t> fast(size_t(w) + 1, 0xabcd), portable(size_t(w), 0xabcd);
      bf16_column_magnitudes(x.data(), ld, rows, w, fast.data());
      quantize_detail::column_magnitudes(x.data(), ld, 0, rows, w, portable.data());
      EXPECT_EQ(fast[size_t(w)], 0xabcd) << "wrote past column " << w;
      for (int64_t i = 0; i < w; ++i) {
        float expected = 0;
        for (int64_t k = 0; k < rows; ++k) {
          const float v = value_of(x[size_t(k * ld + i)].bits);
          if (!std::isnan(v)) expected = std::max(expected, std::fabs(v));
        }
        EXPECT_EQ(value_of(fast[size_t(i)]), expected)
            << "w " << w << " rows " << rows << " column " << i;
        EXPECT_EQ(value_of(portable[size_t(i)]), expected)
            << "portable, w " << w << " rows " << rows << " column " << i;
      }
    }
  }
}

TEST(Bf16Amaxes, EachSegmentOf16GetsItsLargestMagnitudeWithNaNIgnored) {
  std::mt19937 rng(12);
  for (const int64_t segments : {1, 15, 16, 17, 32, 43}) {
    std::vector<bf16_t> row(size_t(segments * 16));
    for (bf16_t& v : row) v.bits = uint16_t(rng());
    // Segment 0 all NaN; the last segment's last value -Inf; segment 1 (where there are more
    // than two) all negative zeros but a +Inf first.
    for (int64_t i = 0; i < 16; ++i) row[size_t(i)].bits = i % 2 ? 0xffc1 : 0x7fa0;
    row.back().bits = 0xff80;
    if (segments > 2)
      for (int64_t i = 0; i < 16; ++i) row[size_t(16 + i)].bits = i == 0 ? 0x7f80 : 0x8000;
    std::vector<float> amax(size_t(segments) + 1, -1.0f);
    bf16_segment16_amaxes(row.data(), segments, amax.data());
    EXPECT_EQ(amax[size_t(segments)], -1.0f) << "wrote past segment " << segments;
    for (int64_t c = 0; c < segments; ++c) {
      float expected = 0;
      for (int64_t i = 0; i < 16; ++i) {
        const float v = value_of(row[size_t(16 * c + i)].bits);
        if (!std::isnan(v)) expected = std::max(expected, std::fabs(v));
      }
      EXPECT_EQ(amax[size_t(c)], expected) << "segments " << segments << " segment " << c;
    }
  }
}

}  // namespace
}  // namespace h2::cpu
