// Scalar encode/decode math of the low-precision formats (E4M3 fn, E5M2, E2M1, E8M0), header-only
// and branch-free over FP32 bit patterns, so that the same code serves as the CPU reference, the
// body of vectorised CPU loops and CUDA device code. Semantics: core/lowp/formats.h.
//
// Encoding works on the FP32 bit pattern: the significand (implicit bit included) is shifted right
// onto the target grid, by more where the target is subnormal, and rounded on the bits that fall
// off; the exponent field is then added, so a carry out of the significand moves to the next
// binade by itself (and past the largest code, which is how overflow is detected).
#pragma once

#include <bit>
#include <cstdint>

#include "core/host_device.h"

namespace h2::lowp::codec {

// ---- bit casts -----------------------------------------------------------------------------

H2_HOST_DEVICE inline uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

H2_HOST_DEVICE inline float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

inline constexpr uint32_t kF32AbsMask = 0x7fffffffu;
inline constexpr uint32_t kF32InfBits = 0x7f800000u;
inline constexpr uint32_t kF32MantissaMask = 0x007fffffu;
inline constexpr uint32_t kF32ImplicitBit = 0x00800000u;
inline constexpr uint32_t kF32QuietNaN = 0x7fc00000u;

H2_HOST_DEVICE inline bool is_nan_bits(uint32_t bits) {
  return (bits & kF32AbsMask) > kF32InfBits;
}

// ---- element formats -----------------------------------------------------------------------

// Compile-time description of a signed element format: 1 sign bit, kExponentBits, kMantissaBits.
// kMaxMagnitude is the largest finite code without its sign; kStandardOverflow is what a too
// large value becomes in Overflow::standard (NaN, Inf, or the largest finite value where the
// format has neither); kNaNCode is the code of NaN inputs (sign kept where kNaNKeepsSign);
// kOverflowBits is the smallest FP32 magnitude that round to nearest even carries past the
// largest finite value.
struct E4M3 {
  static constexpr int kBits = 8, kExponentBits = 4, kMantissaBits = 3, kBias = 7;
  static constexpr uint32_t kMaxMagnitude = 0x7e;      // 448
  static constexpr uint32_t kStandardOverflow = 0x7f;  // NaN (S.1111.111); no Inf
  static constexpr uint32_t kNaNCode = 0x7f;
  static constexpr bool kNaNKeepsSign = true;
  static constexpr bool kHasInf = false;
  static constexpr uint32_t kMaxFiniteBits = 0x43e00000u;  // 448.0f
  static constexpr uint32_t kOverflowBits = 0x43e80001u;   // just above 464: 464 ties to 448
};

struct E5M2 {
  static constexpr int kBits = 8, kExponentBits = 5, kMantissaBits = 2, kBias = 15;
  static constexpr uint32_t kMaxMagnitude = 0x7b;      // 57344
  static constexpr uint32_t kStandardOverflow = 0x7c;  // Inf
  static constexpr uint32_t kNaNCode = 0x7e;           // quiet NaN, as IEEE and ml_dtypes
  static constexpr bool kNaNKeepsSign = true;
  static constexpr bool kHasInf = true;
  static constexpr uint32_t kMaxFiniteBits = 0x47600000u;  // 57344.0f
  static constexpr uint32_t kOverflowBits = 0x47700000u;   // 61440 ties up to 65536
};

// E2M1 has neither NaN nor Inf: overflow always saturates and NaN becomes +6 (as CUDA's
// __nv_cvt_float_to_fp4 does).
struct E2M1 {
  static constexpr int kBits = 4, kExponentBits = 2, kMantissaBits = 1, kBias = 1;
  static constexpr uint32_t kMaxMagnitude = 0x7;  // 6
  static constexpr uint32_t kStandardOverflow = 0x7;
  static constexpr uint32_t kNaNCode = 0x7;
  static constexpr bool kNaNKeepsSign = false;
  static constexpr bool kHasInf = false;
  static constexpr uint32_t kMaxFiniteBits = 0x40c00000u;  // 6.0f
  static constexpr uint32_t kOverflowBits = 0x40e00000u;   // 7 ties up to 8
};

// Where an FP32 magnitude lands on the target grid: its significand with the implicit bit
// (`significand`, < 2^24), how far right it must move to become a count of target grid steps
// (`shift`), and the target exponent field that the count is added to (`exponent_base`, which
// is the biased exponent minus one, or 0 in the subnormal range).
struct GridPosition {
  uint32_t significand;
  uint32_t shift;
  uint32_t exponent_base;
};

template <class F>
H2_HOST_DEVICE inline GridPosition grid_position(uint32_t abs_bits) {
  const uint32_t exponent_field = abs_bits >> 23;
  const uint32_t significand =
      (abs_bits & kF32MantissaMask) | (exponent_field != 0 ? kF32ImplicitBit : 0u);
  // FP32 subnormals have the scale of exponent field 1, without the implicit bit.
  const int32_t exponent = static_cast<int32_t>(exponent_field != 0 ? exponent_field : 1u);
  const int32_t target_exponent = exponent - 127 + F::kBias;
  const int32_t subnormal_extra = target_exponent < 1 ? 1 - target_exponent : 0;
  GridPosition p;
  p.significand = significand;
  p.shift = static_cast<uint32_t>(23 - F::kMantissaBits + subnormal_extra);
  p.exponent_base = static_cast<uint32_t>(target_exponent > 1 ? target_exponent - 1 : 0);
  return p;
}

// Sign bit of an FP32 pattern moved to the format's sign position.
template <class F>
H2_HOST_DEVICE inline uint32_t sign_of(uint32_t bits) {
  return (bits >> 31) << (F::kBits - 1);
}

// The code of a magnitude (grid steps plus exponent base), applying the overflow rule, or of NaN.
template <class F>
H2_HOST_DEVICE inline uint32_t finish_code(uint32_t bits, uint32_t magnitude, bool saturate) {
  const uint32_t too_large = saturate ? F::kMaxMagnitude : F::kStandardOverflow;
  const uint32_t finite = magnitude > F::kMaxMagnitude ? too_large : magnitude;
  const uint32_t nan_code = F::kNaNCode | (F::kNaNKeepsSign ? sign_of<F>(bits) : 0u);
  return is_nan_bits(bits) ? nan_code : (sign_of<F>(bits) | finite);
}

// All ones where `condition` holds, else 0; and a select by such a mask.
H2_HOST_DEVICE inline uint32_t mask_if(bool condition) {
  return 0u - static_cast<uint32_t>(condition);
}
H2_HOST_DEVICE inline uint32_t select_bits(uint32_t mask, uint32_t if_set, uint32_t if_clear) {
  return (if_set & mask) | (if_clear & ~mask);
}

// finish_code with its selects as masks, for a magnitude computed through float-to-integer
// conversions: there GCC 12 turns finish_code's conditional expressions into branches (it treats
// the conversions as possibly trapping, so it will not compute them unconditionally) and then does
// not vectorise the loop. Not used for everything: the masks cost encode_rne_batch's loop 8%.
template <class F>
H2_HOST_DEVICE inline uint32_t finish_code_masked(uint32_t bits, uint32_t magnitude,
                                                  bool saturate) {
  const uint32_t too_large = saturate ? F::kMaxMagnitude : F::kStandardOverflow;
  const uint32_t finite = select_bits(mask_if(magnitude > F::kMaxMagnitude), too_large, magnitude);
  const uint32_t nan_code = F::kNaNCode | (F::kNaNKeepsSign ? sign_of<F>(bits) : 0u);
  return select_bits(mask_if(is_nan_bits(bits)), nan_code, sign_of<F>(bits) | finite);
}

// Round to nearest, ties to even. `bits` is an FP32 pattern; the result is the format's code in
// the low F::kBits bits. saturate: beyond max_finite (Inf included) -> +-max_finite.
template <class F>
H2_HOST_DEVICE inline uint32_t encode_rne(uint32_t bits, bool saturate) {
  const GridPosition p = grid_position<F>(bits & kF32AbsMask);
  // Shifts past 25 lose the whole significand (< 2^24 < half a step) and give 0 like 25 does.
  const uint32_t shift = p.shift < 25u ? p.shift : 25u;
  const uint32_t half_minus_one = (1u << (shift - 1)) - 1u;
  const uint32_t odd = (p.significand >> shift) & 1u;
  const uint32_t steps = (p.significand + half_minus_one + odd) >> shift;
  return finish_code<F>(bits, (p.exponent_base << F::kMantissaBits) + steps, saturate);
}

// encode_rne in fewer vector operations, for the batch encoders: bit for bit the same code for
// every FP32 input and both overflow rules (tests compare them on every upper half of the bit
// pattern; all 2^32 inputs of each format were compared once). Normal targets: one integer add
// rounds the FP32 significand to M bits, ties to even, its carry moving into the exponent field
// by itself, which is then rebiased. Subnormal targets (below 2^(1 - bias)): adding 2^23 quanta
// in FP32 rounds |x| to a whole number of quanta (ties to even, the FPU's rounding), which is the
// code. No variable shifts, which AVX2 has only for 32-bit lanes and which cost most of
// encode_rne's time.
template <class F>
H2_HOST_DEVICE inline uint32_t encode_rne_batch(uint32_t bits, bool saturate) {
  constexpr uint32_t kDrop = 23 - F::kMantissaBits;  // FP32 mantissa bits below the target's
  const uint32_t abs_bits = bits & kF32AbsMask;
  const uint32_t rounded =
      (abs_bits + ((1u << (kDrop - 1)) - 1u) + ((abs_bits >> kDrop) & 1u)) >> kDrop;
  const uint32_t normal = rounded - ((127u - F::kBias) << F::kMantissaBits);
  constexpr uint32_t kMagicBits = (151u - F::kBias - F::kMantissaBits) << 23;  // 2^23 quanta
  const uint32_t subnormal = float_bits(bits_float(abs_bits) + bits_float(kMagicBits)) - kMagicBits;
  constexpr uint32_t kMinNormalBits = (128u - F::kBias) << 23;
  return finish_code<F>(bits, abs_bits < kMinNormalBits ? subnormal : normal, saturate);
}

// Stochastic rounding: between the grid points lo <= |x| < hi, hi with probability
// (|x| - lo) / (hi - lo), taken from the 32 uniform `random_bits` (0 rounds toward zero, all
// ones away from it). The probability is exact while the step is at most 2^32 FP32 ulps of x
// (every normal target value; beyond, it is rounded down to a multiple of 2^-32). Overflow as
// encode_rne, so without saturation a value between max_finite and the next step overflows with
// the probability of rounding up.
template <class F>
H2_HOST_DEVICE inline uint32_t encode_stochastic(uint32_t bits, uint32_t random_bits,
                                                 bool saturate) {
  const GridPosition p = grid_position<F>(bits & kF32AbsMask);
  // Beyond 56 the significand (< 2^24) is under 2^-32 of a step: always rounds down.
  const uint32_t shift = p.shift < 56u ? p.shift : 56u;
  const uint32_t kept_shift = shift < 31u ? shift : 31u;  // significand >> 31 is 0 anyway
  const uint32_t lo_steps = p.significand >> kept_shift;
  const uint32_t remainder = p.significand - (lo_steps << kept_shift);
  // Rounds up when remainder + (a uniform number in [0, 2^shift)) carries, i.e. when
  // ~random < remainder, both cut to 32 bits.
  const uint32_t random_drop = shift < 32u ? 32u - shift : 0u;
  const uint32_t remainder_drop = shift > 32u ? shift - 32u : 0u;
  const uint32_t round_up = (~random_bits >> random_drop) < (remainder >> remainder_drop) ? 1u : 0u;
  const uint32_t steps = lo_steps + round_up;
  return finish_code<F>(bits, (p.exponent_base << F::kMantissaBits) + steps, saturate);
}

// encode_stochastic in fewer vector operations, for the batch encoders: bit for bit the same code
// for every FP32 input, random bits and overflow rule (tests compare them on every upper half of
// the bit pattern with edge and random lower halves and random bits). Normal targets: adding the
// top kDrop random bits to the FP32 pattern carries into the kept bits exactly when
// encode_stochastic's ~random < remainder does, the carry moving into the exponent field by itself.
// Subnormal targets (below 2^(1 - bias)): |x| in quanta of the subnormal grid is y = |x| *
// 2^(bias + M - 1) (exact), whose whole part is the lower code and whose fraction, as a 32-bit
// threshold (two exact 16-bit steps, since AVX2 converts only to signed integers), decides the
// round up. No variable shifts.
template <class F>
H2_HOST_DEVICE inline uint32_t encode_stochastic_batch(uint32_t bits, uint32_t random_bits,
                                                       bool saturate) {
  constexpr uint32_t kDrop = 23 - F::kMantissaBits;
  const uint32_t abs_bits = bits & kF32AbsMask;
  const uint32_t normal = ((abs_bits + (random_bits >> (32 - kDrop))) >> kDrop) -
                          ((127u - F::kBias) << F::kMantissaBits);
  constexpr uint32_t kMinNormalBits = (128u - F::kBias) << 23;
  const uint32_t subnormal_target = mask_if(abs_bits < kMinNormalBits);
  // y < 2^M where the target is subnormal; 0 elsewhere, so that every conversion is in range.
  constexpr float kQuantaPerUnit = static_cast<float>(1u << (F::kBias + F::kMantissaBits - 1));
  const float y = bits_float(abs_bits & subnormal_target) * kQuantaPerUnit;
  const int32_t whole = static_cast<int32_t>(y);
  const float high = (y - static_cast<float>(whole)) * 65536.0f;  // fraction * 2^16, exact
  const int32_t high_part = static_cast<int32_t>(high);
  const int32_t low_part = static_cast<int32_t>((high - static_cast<float>(high_part)) * 65536.0f);
  const uint32_t threshold =
      (static_cast<uint32_t>(high_part) << 16) | static_cast<uint32_t>(low_part);
  const uint32_t subnormal = static_cast<uint32_t>(whole) + (~random_bits < threshold ? 1u : 0u);
  return finish_code_masked<F>(bits, select_bits(subnormal_target, subnormal, normal), saturate);
}

// The FP32 value of a code (E2M1: the low 4 bits are used).
template <class F>
H2_HOST_DEVICE inline float decode(uint32_t code) {
  constexpr uint32_t kMagnitudeMask = (1u << (F::kBits - 1)) - 1u;
  constexpr uint32_t kMantissaMask = (1u << F::kMantissaBits) - 1u;
  const uint32_t sign = ((code >> (F::kBits - 1)) & 1u) << 31;
  const uint32_t magnitude = code & kMagnitudeMask;
  const uint32_t exponent = magnitude >> F::kMantissaBits;
  const uint32_t mantissa = magnitude & kMantissaMask;
  const uint32_t normal =
      ((exponent + 127u - F::kBias) << 23) | (mantissa << (23 - F::kMantissaBits));
  // A subnormal is mantissa * 2^(1 - bias - M), exact in FP32 for every format here.
  const float quantum = bits_float(static_cast<uint32_t>(128 - F::kBias - F::kMantissaBits) << 23);
  const uint32_t subnormal = float_bits(static_cast<float>(mantissa) * quantum);
  // Codes beyond the largest finite one: E4M3's NaN; E5M2's Inf and NaNs.
  const uint32_t special =
      (F::kHasInf && magnitude == F::kStandardOverflow) ? kF32InfBits : kF32QuietNaN;
  const uint32_t abs_bits =
      magnitude > F::kMaxMagnitude ? special : (exponent == 0 ? subnormal : normal);
  return bits_float(sign | abs_bits);
}

// The bf16 bits of decode<F>(code): every value of these formats is a bf16 number (at most 4
// significant bits, exponents well inside bf16's), so this is decode's FP32 pattern cut to its
// top half. Integer arithmetic only, so that batch loops vectorise (decode's table lookups and
// its FP32 subnormal product do not, under GCC's default trapping math).
template <class F>
H2_HOST_DEVICE inline uint32_t decode_bf16_bits(uint32_t code) {
  static_assert(F::kMantissaBits <= 3, "the subnormal leading-bit search covers 3 bits");
  // Every quantity fits in 16 bits and is kept there, so a vectorised loop of byte codes runs
  // in 16-bit lanes (twice the elements per instruction of 32-bit ones).
  using U16 = uint16_t;
  constexpr U16 kMagnitudeMask = (1u << (F::kBits - 1)) - 1u;
  constexpr U16 kMantissaMask = (1u << F::kMantissaBits) - 1u;
  const U16 sign = U16(((code >> (F::kBits - 1)) & 1u) << 15);
  const U16 magnitude = U16(code & kMagnitudeMask);
  // A normal code is its exponent and mantissa fields shifted onto bf16's, plus the rebias.
  const U16 normal = U16((magnitude << (7 - F::kMantissaBits)) + ((127u - F::kBias) << 7));
  // A subnormal m * 2^(1 - bias - M), m < 2^M, with its leading bit p: exponent field
  // 128 - bias - M + p, mantissa the bits below p moved to the top of bf16's 7.
  const U16 p = U16((magnitude >= 2u ? 1u : 0u) + (magnitude >= 4u ? 1u : 0u));
  const U16 subnormal_bits =
      U16(((128u - F::kBias - F::kMantissaBits + p) << 7) | ((magnitude * (128u >> p)) & 0x7fu));
  const U16 subnormal = magnitude == 0 ? U16(0) : subnormal_bits;
  const U16 special = (F::kHasInf && magnitude == F::kStandardOverflow) ? U16(kF32InfBits >> 16)
                                                                        : U16(kF32QuietNaN >> 16);
  const U16 abs_bits =
      magnitude > F::kMaxMagnitude ? special : (magnitude <= kMantissaMask ? subnormal : normal);
  return U16(sign | abs_bits);
}

// ---- E8M0 (unsigned power-of-two scales) ----------------------------------------------------

inline constexpr uint32_t kE8M0NaN = 0xff;
inline constexpr uint32_t kE8M0Max = 0xfe;  // 2^127

// Rounds to a power of two as ml_dtypes' float8_e8m0fnu does: for normal FP32 inputs the
// exponent goes up when the mantissa is at least half (ties 1.5 * 2^e go up); FP32 subnormals up
// to 2^-127 give code 0 (2^-127) and larger ones code 1 (2^-126). Beyond 2^127 (rounded),
// Inf: saturate -> 2^127, standard -> NaN. NaN -> NaN. Zero and negative inputs: saturate uses
// |x| (zero -> 2^-127); standard gives NaN (E8M0 has neither zero nor sign).
H2_HOST_DEVICE inline uint32_t encode_e8m0(uint32_t bits, bool saturate) {
  const uint32_t abs_bits = bits & kF32AbsMask;
  const uint32_t exponent_field = abs_bits >> 23;
  const uint32_t mantissa = abs_bits & kF32MantissaMask;
  const uint32_t half = 0x400000u + (exponent_field == 0 ? 1u : 0u);
  const uint32_t code = exponent_field + (mantissa >= half ? 1u : 0u);
  const uint32_t finite = code > kE8M0Max ? (saturate ? kE8M0Max : kE8M0NaN) : code;
  const bool no_representation = abs_bits == 0 || (bits >> 31) != 0;
  const uint32_t checked = (!saturate && no_representation) ? kE8M0NaN : finite;
  return is_nan_bits(bits) ? kE8M0NaN : checked;
}

// 2^(code - 127); code 0 is 2^-127 (an FP32 subnormal); 0xff is NaN.
H2_HOST_DEVICE inline float decode_e8m0(uint32_t code) {
  code &= 0xffu;
  const uint32_t bits = code == 0 ? 0x00400000u : code << 23;
  return bits_float(code == kE8M0NaN ? kF32QuietNaN : bits);
}

// ---- counter-based random bits ---------------------------------------------------------------

// splitmix64's finaliser: a bijective mix of 64 bits.
H2_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The per-seed key of counter_random (hoisted out of loops by batch callers).
H2_HOST_DEVICE inline uint64_t random_key(uint64_t seed) {
  return mix64(seed ^ 0x6a09e667f3bcc909ull);
}

// The counter's step per index (2^64 / golden ratio); batch encoders advance counters by it.
inline constexpr uint64_t kCounterStep = 0x9e3779b97f4a7c15ull;

H2_HOST_DEVICE inline uint32_t counter_random_from_key(uint64_t key, uint64_t index) {
  return static_cast<uint32_t>(mix64(key + index * kCounterStep) >> 32);
}

// 32 random bits, a pure function of (seed, index).
H2_HOST_DEVICE inline uint32_t counter_random(uint64_t seed, uint64_t index) {
  return counter_random_from_key(random_key(seed), index);
}

}  // namespace h2::lowp::codec
