// Exact bit-level conversions between f32 and the 16-bit float formats (bf16, f16): round to
// nearest, ties to even; NaN stays NaN (quiet); f16 overflow goes to infinity as in IEEE 754.
// Header-only so kernels inline them; tests check every 16-bit pattern against double arithmetic.
#pragma once

#include <bit>
#include <cstdint>

namespace h2 {

struct bf16_t {
  uint16_t bits;
};
struct f16_t {
  uint16_t bits;
};

inline float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);                             // ties to even
  return uint16_t((u + rounding) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exactly representable in f32.
    float magnitude = float(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in f16: quantum 2^-24. Adding 0.5 (as f32) aligns the
    // mantissa so that the FPU's own round-to-nearest-even does the rounding.
    float shifted = std::bit_cast<float>(abs) + 0.5f;
    return uint16_t(sign | (std::bit_cast<uint32_t>(shifted) - 0x3f000000u));
  }
  uint32_t rounding = 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((abs - (112u << 23) + rounding) >> 13));
}

}  // namespace h2
