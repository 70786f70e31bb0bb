// transpose_to_f32 (backends/cpu/kernels/transpose.h): every element of src lands at its
// transposed place in dst bit for bit (raw bit patterns, NaN payloads and subnormals included),
// for shapes that are and are not multiples of the 8 x 8 register tile, padded strides on both
// sides, and each storage type; what lies past the copied region of dst is left alone. Likewise
// transpose_bytes (FP8 codes) across its 64 x 16 and 16 x 16 tiles. This file
// is built with the CPU kernels' -march, so it exercises the AVX2 tiles where the kernels have
// them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/kernels/transpose.h"

namespace h2::cpu {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Random storage values from random bit patterns: every class of float (NaN, inf, subnormal).
template <class T>
std::vector<T> random_values(size_t n, std::mt19937& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    const uint32_t bits = rng();
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(&x, &bits, sizeof x);
    } else {
      x.bits = uint16_t(bits);
    }
  }
  return v;
}

template <class T>
void check_shapes() {
  std::mt19937 rng(7);
  for (int64_t rows : {1, 7, 8, 9, 16, 37})
    for (int64_t cols : {1, 8, 13, 32}) {
      const int64_t src_ld = cols + 3, dst_ld = rows + 5;
      const std::vector<T> src = random_values<T>(size_t(rows * src_ld), rng);
      const float sentinel = -12345.0f;
      std::vector<float> dst(size_t(cols * dst_ld), sentinel);
      transpose_to_f32(src.data(), src_ld, rows, cols, dst.data(), dst_ld);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < dst_ld; ++r) {
          const float got = dst[size_t(c * dst_ld + r)];
          const float want = r < rows ? load(&src[size_t(r * src_ld + c)]) : sentinel;
          ASSERT_EQ(bits_of(got), bits_of(want))
              << "rows " << rows << " cols " << cols << ": dst(" << c << ", " << r << ")";
        }
    }
}

TEST(CpuTranspose, F32EveryElementInItsPlace) {
  check_shapes<float>();
}
TEST(CpuTranspose, Bf16WidenedExactlyInItsPlace) {
  check_shapes<bf16_t>();
}
TEST(CpuTranspose, F16WidenedExactlyInItsPlace) {
  check_shapes<f16_t>();
}

// transpose_bytes: the 64 x 16 (AVX512BW) and 16 x 16 tiles and the element-wise edges, for a
// column range [c_begin, c_end) of src; dst rows outside the range and padding stay untouched.
TEST(CpuTranspose, BytesEveryElementInItsPlaceForAColumnRange) {
  std::mt19937 rng(9);
  for (int64_t rows : {1, 15, 16, 17, 40, 64, 65, 130})
    for (int64_t cols : {1, 16, 63, 64, 65, 130, 256})
      for (const int64_t c_begin : {int64_t(0), std::min<int64_t>(cols - 1, 3)}) {
        const int64_t c_end = cols, src_ld = cols + 5, dst_ld = rows + 7;
        std::vector<uint8_t> src(size_t(rows * src_ld));
        for (uint8_t& b : src) b = uint8_t(rng());
        const uint8_t sentinel = 0xA5;
        std::vector<uint8_t> dst(size_t(cols * dst_ld), sentinel);
        transpose_bytes(src.data(), src_ld, rows, c_begin, c_end, dst.data(), dst_ld);
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t r = 0; r < dst_ld; ++r) {
            const bool copied = c >= c_begin && c < c_end && r < rows;
            const uint8_t want = copied ? src[size_t(r * src_ld + c)] : sentinel;
            ASSERT_EQ(dst[size_t(c * dst_ld + r)], want)
                << "rows " << rows << " cols " << cols << " from column " << c_begin << ": dst("
                << c << ", " << r << ")";
          }
      }
}

}  // namespace
}  // namespace h2::cpu
