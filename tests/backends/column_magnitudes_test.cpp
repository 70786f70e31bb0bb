// bf16_column_magnitudes (backends/cpu/kernels/column_magnitudes.h) and the portable loop it
// falls back to, against the definition written out: the largest |x| of each column over the
// band's rows, compared as values, NaN ignored (a column of NaNs gives 0), Inf counted. Random
// bit patterns (every class: NaN with either sign, Inf, subnormals, zeros of both signs), for
// widths across the 32-lane and 256-column boundaries and a row stride wider than the band.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernels/column_magnitudes.h"
#include "backends/cpu/kernels/quantize_rows.h"

namespace h2::cpu {
namespace {

float value_of(uint16_t bits) {
  return bf16_to_f32(bits);
}

TEST(ColumnMagnitudes, EachColumnGetsItsLargestMagnitudeWithNaNIgnored) {
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

}  // namespace
}  // namespace h2::cpu
