// Internals shared by core/lowp's batch encoders and decoders (formats.cpp, encode_batch.cpp,
// encode_avx512.cpp, encode_avx2.cpp): one batch encode as every path takes it, what the vector
// paths share (their totals, rounding constants, instantiations and which runs they take), the
// format dispatch. The portable loops run in in_fastest_build (core/fastest_build.h).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/fastest_build.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/formats.h"

namespace h2::lowp::detail {

// One batch encode: value i (in[i], FP32 or, with bf16, the top halves of FP32 patterns) times its
// multiplier (multipliers[i / block] when multipliers is set, else `multiplier`), for i < n, into
// `out` (bytes, or E2M1 packed two per byte, an odd n leaving the last high nibble 0).
// Stochastic: element i draws counter_random_from_key(key, first_index + i * index_stride).
struct EncodeRun {
  const void* in = nullptr;
  bool bf16 = false;
  int64_t n = 0;
  float multiplier = 1;
  const float* multipliers = nullptr;
  int64_t block = std::numeric_limits<int64_t>::max();
  uint8_t* out = nullptr;
  bool saturate = true;
  bool stochastic = false;
  uint64_t key = 0;
  uint64_t first_index = 0;
  uint64_t index_stride = 1;
  bool track_amax = false;  // of the values before scaling, NaN ignored
};

// What a vector path's run saw: the largest |in[i]| as FP32 bits (NaN ignored; only with
// track_amax) and the count of scaled values that round past the largest finite value
// (EncodeStats' meaning).
struct EncodeTotals {
  uint32_t amax_bits = 0;
  int64_t saturated = 0;
};

// The scalar constants of the vector paths' rounding, which is format_codec.h's encode_rne_batch
// and encode_stochastic_batch lane by lane.
template <class F>
struct RoundingConstants {
  static constexpr uint32_t kDrop = 23 - F::kMantissaBits;  // FP32 mantissa bits dropped
  static constexpr uint32_t kNormalBias = (127u - F::kBias) << F::kMantissaBits;
  static constexpr uint32_t kMagicBits = (151u - F::kBias - F::kMantissaBits) << 23;
  static constexpr uint32_t kMinNormalBits = (128u - F::kBias) << 23;
  // Round half up, less the exponent rebias moved above the dropped bits: (abs + this + odd) >>
  // kDrop is the rebiased code wherever abs is at least the smallest normal (no borrow there).
  static constexpr uint32_t kRneAddend = (1u << (kDrop - 1)) - 1u - (kNormalBias << kDrop);
  // A magnitude in quanta of the subnormal grid is |x| times this (exact).
  static constexpr float kQuantaPerUnit =
      static_cast<float>(1u << (F::kBias + F::kMantissaBits - 1));
};

// Whether a vector path of `lanes` lanes takes the run: one multiplier (or one block), one per
// value, or blocks of at least `lanes` values (a step then reaches into two blocks at most).
inline bool vector_path_takes(const EncodeRun& run, int64_t lanes) {
  return run.multipliers == nullptr || run.block == 1 || run.block >= lanes || run.block >= run.n;
}

inline bool saturates(Overflow overflow) {
  return overflow == Overflow::saturate;
}

// Calls fn(codec::E4M3{}) etc. for the element formats; E8M0 is a scale format only.
template <class Fn>
decltype(auto) with_element_format(Format f, const char* what, Fn&& fn) {
  switch (f) {
    case Format::e4m3:
      return fn(codec::E4M3{});
    case Format::e5m2:
      return fn(codec::E5M2{});
    case Format::e2m1:
      return fn(codec::E2M1{});
    case Format::e8m0:
      break;
  }
  H2_THROW(Error, "{}: e8m0 is a scale format, not an element format", what);
}

// The vector paths' loop instantiations: calls fn(format, stochastic, bf16, per_value) with
// each as a compile-time constant (a codec format tag, std::bool_constant) for the run's case:
// per_value when the run has one multiplier per value.
template <class Fn>
EncodeTotals with_loop_kind(Format f, const EncodeRun& run, const char* what, Fn&& fn) {
  return with_element_format(f, what, [&](auto format) {
    auto with_rounding = [&](auto stochastic) {
      const bool per_value = run.multipliers != nullptr && run.block == 1;
      if (run.bf16) {
        return per_value ? fn(format, stochastic, std::true_type{}, std::true_type{})
                         : fn(format, stochastic, std::true_type{}, std::false_type{});
      }
      return per_value ? fn(format, stochastic, std::false_type{}, std::true_type{})
                       : fn(format, stochastic, std::false_type{}, std::false_type{});
    };
    return run.stochastic ? with_rounding(std::true_type{}) : with_rounding(std::false_type{});
  });
}

}  // namespace h2::lowp::detail
