// Independent references shared by the low-precision format tests (formats_test.cpp,
// encode_batch_test.cpp): each format's bit layout and textbook decoding written out here, not
// taken from the library, its finite grid, a mix of inputs that covers every encoding path, and
// the saturation rule computed in double.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/lowp/formats.h"

namespace h2::lowp::testing {

constexpr Format kElementFormats[] = {Format::e4m3, Format::e5m2, Format::e2m1};
constexpr Format kAllFormats[] = {Format::e4m3, Format::e5m2, Format::e2m1, Format::e8m0};
constexpr Overflow kOverflows[] = {Overflow::saturate, Overflow::standard};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Bit layout of a signed element format, written out here independently of the library.
struct Layout {
  int bits, exponent_bits, mantissa_bits, bias;
};

inline Layout layout(Format f) {
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

inline int code_count(Format f) {
  return f == Format::e2m1 ? 16 : 256;
}
inline std::string name(Format f) {
  return std::string(format_info(f).name);
}

// sign * 2^(e - bias) * (1 + m / 2^M), subnormals sign * 2^(1 - bias) * (m / 2^M), in double.
inline double reference_decode(Format f, int code) {
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

inline float from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

// The finite non-negative values of a format with their codes, ascending.
inline std::vector<std::pair<double, int>> finite_grid(Format f) {
  std::vector<std::pair<double, int>> grid;
  const int sign_bit = 1 << (layout(f).bits - 1);
  for (int code = 0; code < sign_bit; ++code) {
    const double v = reference_decode(f, code);
    if (std::isfinite(v)) grid.push_back({v, code});
  }
  std::sort(grid.begin(), grid.end());
  return grid;
}

// A mix that covers every path: random bit patterns (NaN, Inf, subnormals, huge), values around
// the format's range, exact ties, and +-0.
inline std::vector<float> mixed_inputs(Format f, size_t n, uint64_t seed) {
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

inline uint8_t code_at(Format f, const std::vector<uint8_t>& out, size_t i) {
  return f == Format::e2m1 ? (out[i / 2] >> ((i & 1) * 4)) & 15 : out[i];
}

// Whether round-to-nearest-even with an unbounded exponent would carry |y| past max_finite:
// beyond max + ulp(max)/2, or exactly there when max's last mantissa bit is odd (the tie goes up).
inline bool rounds_past_max(Format f, double y) {
  const FormatInfo& info = format_info(f);
  const double max = info.max_finite;
  const double ulp = std::ldexp(1.0, int(std::floor(std::log2(max))) - info.mantissa_bits);
  const bool max_is_odd = std::fmod(max / ulp, 2.0) == 1.0;
  const double threshold = max + ulp / 2;
  return std::fabs(y) > threshold || (std::fabs(y) == threshold && max_is_odd);
}

inline EncodeStats direct_stats(Format f, const std::vector<float>& x, float multiplier) {
  EncodeStats s;
  for (float v : x) {
    if (!std::isnan(v)) s.amax = std::max(s.amax, std::fabs(v));
    const float y = v * multiplier;
    s.saturated += !std::isnan(y) && rounds_past_max(f, y);
  }
  return s;
}

}  // namespace h2::lowp::testing
