// transpose_to_f32 (backends/cpu/kernels/transpose.h): every element of src lands at its
// transposed place in dst bit for bit (raw bit patterns, NaN payloads and subnormals included),
// for shapes that are and are not multiples of the 8 x 8 register tile, padded strides on both
// sides, and each storage type; what lies past the copied region of dst is left alone. This file
// is built with the CPU kernels' -march, so it exercises the AVX2 tiles where the kernels have
// them.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace h2::cpu
