// The batch encoders' AVX2 path (see encode_avx2.h).
//
// Shapes: 8 FP32 lanes per step. A tail of n % 8 elements runs the same step on a zeroed copy of
// its values (AVX2 has no 16-bit masked loads and no narrowing stores): the padding lanes'
// products (0 times the multiplier: +0, or -0 or NaN for a negative or non-finite one) never
// saturate and leave the amax alone, and only the tail's codes are copied out, E2M1's last high
// nibble of an odd length cleared. Random bits: the 8 64-bit counters key + (first_index + i *
// index_stride) * kCounterStep lie in two 4-lane vectors, elements {0, 1, 4, 5} and {2, 3, 6, 7},
// so that one shuffle of their high halves gives the 8 lanes in order; both advance by 8 strides
// a step. AVX2 has no 64-bit multiply, so splitmix64's products are built from three 32 x 32 ->
// 64-bit ones. It has no unsigned compares either: every magnitude compared here is below 2^31,
// where signed compares agree, and the stochastic round-up test ~random < threshold compares with
// both sign bits flipped.
//
// Why not the portable loops built for x86-64-v3: GCC vectorised them with the random counters
// multiplied per element in scalar code and the codes bounced through a 64-byte buffer, and a
// quantizer's bf16 rows with their blocks' multipliers went through a second buffer of FP32
// products first (docs/performance.md, stop 43, has the figures).
#include "core/lowp/encode_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/lowp/encode_batch.h"
#include "core/lowp/format_codec.h"

namespace h2::lowp::detail {

#if defined(__x86_64__)
namespace {

#define H2_ENCODE_TARGET gnu::target("avx2")

using codec::kF32AbsMask;
using codec::kF32InfBits;

constexpr int64_t kLanes = 8;

[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i splat(uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i splat64(uint64_t v) {
  return _mm256_set1_epi64x(static_cast<long long>(v));
}

// The per-format constants of the rounding and finishing steps, built once before a loop.
template <class F>
struct Constants : RoundingConstants<F> {
  using R = RoundingConstants<F>;
  __m256i abs_mask = splat(kF32AbsMask);
  __m256i inf = splat(kF32InfBits);
  __m256i one = splat(1);
  __m256i rne_addend = splat(R::kRneAddend);
  __m256i normal_bias = splat(R::kNormalBias);
  __m256i magic = splat(R::kMagicBits);
  __m256i min_normal = splat(R::kMinNormalBits);
  __m256i below_overflow = splat(F::kOverflowBits - 1);
  __m256i max_magnitude = splat(F::kMaxMagnitude);
  __m256i nan_code = splat(F::kNaNCode);
  __m256i sign_bit = splat(1u << (F::kBits - 1));
  __m256i too_large;
  [[H2_ENCODE_TARGET, gnu::always_inline]] explicit Constants(bool saturate)
      : too_large(splat(saturate ? F::kMaxMagnitude : F::kStandardOverflow)) {}
};

// Round to nearest even: encode_rne_batch's magnitude (code without sign and overflow rule).
template <class F>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i rne_magnitude(__m256i abs,
                                                                      const Constants<F>& k) {
  constexpr uint32_t kDrop = RoundingConstants<F>::kDrop;
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(abs, kDrop), k.one);
  const __m256i normal =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(abs, k.rne_addend), odd), kDrop);
  const __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_castsi256_ps(k.magic));
  const __m256i subnormal = _mm256_sub_epi32(_mm256_castps_si256(sum), k.magic);
  return _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(k.min_normal, abs));
}

// Stochastic rounding: encode_stochastic_batch's magnitude, with its two exact 16-bit steps to
// the fraction's 32-bit threshold (AVX2 converts only to signed integers). Lanes past the
// subnormal range (NaN included) compute garbage in the conversions, which do not trap, and the
// final blend drops it.
template <class F>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i stochastic_magnitude(
    __m256i abs, __m256i random, const Constants<F>& k) {
  constexpr uint32_t kDrop = RoundingConstants<F>::kDrop;
  const __m256i normal = _mm256_sub_epi32(
      _mm256_srli_epi32(_mm256_add_epi32(abs, _mm256_srli_epi32(random, 32 - kDrop)), kDrop),
      k.normal_bias);
  const __m256i subnormal_target = _mm256_cmpgt_epi32(k.min_normal, abs);
  const __m256 y =
      _mm256_mul_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(RoundingConstants<F>::kQuantaPerUnit));
  const __m256i whole = _mm256_cvttps_epi32(y);
  const __m256 to_16_bits = _mm256_set1_ps(65536.0f);
  const __m256 high = _mm256_mul_ps(_mm256_sub_ps(y, _mm256_cvtepi32_ps(whole)), to_16_bits);
  const __m256i high_part = _mm256_cvttps_epi32(high);
  const __m256i low_part = _mm256_cvttps_epi32(
      _mm256_mul_ps(_mm256_sub_ps(high, _mm256_cvtepi32_ps(high_part)), to_16_bits));
  const __m256i threshold = _mm256_or_si256(_mm256_slli_epi32(high_part, 16), low_part);
  // ~random < threshold as unsigned numbers; with both sign bits flipped, ~random is
  // random ^ 0x7fffffff.
  const __m256i up = _mm256_cmpgt_epi32(_mm256_xor_si256(threshold, splat(0x80000000u)),
                                        _mm256_xor_si256(random, k.abs_mask));
  const __m256i subnormal = _mm256_sub_epi32(whole, up);  // up is -1 where it rounds up
  return _mm256_blendv_epi8(normal, subnormal, subnormal_target);
}

// finish_code: the overflow rule (too_large: the saturating or the standard code, an unsigned
// min since every format's standard code is its largest magnitude or the next one), NaN
// (`nan`: all ones in NaN lanes) and the sign, taken from bits >> (32 - kBits), whose top code
// bit is the sign. E2M1's NaN code is its too_large either way, so its NaN lanes are already
// coded, less the sign.
template <class F>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i finish(__m256i bits, __m256i nan,
                                                               __m256i magnitude,
                                                               const Constants<F>& k) {
  static_assert(F::kStandardOverflow == F::kMaxMagnitude ||
                F::kStandardOverflow == F::kMaxMagnitude + 1);
  const __m256i finite = _mm256_min_epu32(magnitude, k.too_large);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 32 - F::kBits), k.sign_bit);
  if constexpr (F::kNaNKeepsSign) {
    return _mm256_or_si256(_mm256_blendv_epi8(finite, k.nan_code, nan), sign);
  } else {
    static_assert(F::kNaNCode == F::kMaxMagnitude && F::kNaNCode == F::kStandardOverflow);
    return _mm256_or_si256(finite, _mm256_andnot_si256(nan, sign));
  }
}

// a * c modulo 2^64 in each 64-bit lane, c given as its low and high 32-bit halves (each in the
// low half of every lane): the low halves' product plus the two cross products moved up.
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i multiply64(__m256i a, __m256i c_low,
                                                                   __m256i c_high) {
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_low),
                                         _mm256_mul_epu32(a, c_high));
  return _mm256_add_epi64(_mm256_mul_epu32(a, c_low), _mm256_slli_epi64(cross, 32));
}

// splitmix64's finaliser (format_codec.h's mix64) of 4 counters.
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i mix64(__m256i z) {
  constexpr uint64_t kFirst = 0xbf58476d1ce4e5b9ull, kSecond = 0x94d049bb133111ebull;
  z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 30));
  z = multiply64(z, splat64(kFirst & 0xffffffffu), splat64(kFirst >> 32));
  z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 27));
  z = multiply64(z, splat64(kSecond & 0xffffffffu), splat64(kSecond >> 32));
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// The random bits of a run's steps: counters of elements {0, 1, 4, 5} and {2, 3, 6, 7} of the
// step, whose mixes' high halves one shuffle puts in element order.
struct RandomCounters {
  __m256i low, high, advance;

  [[H2_ENCODE_TARGET, gnu::always_inline]] RandomCounters(const EncodeRun& run) {
    const uint64_t base = run.key + run.first_index * codec::kCounterStep;
    const uint64_t stride = run.index_stride * codec::kCounterStep;
    auto at = [&](uint64_t lane) { return static_cast<long long>(base + lane * stride); };
    low = _mm256_setr_epi64x(at(0), at(1), at(4), at(5));
    high = _mm256_setr_epi64x(at(2), at(3), at(6), at(7));
    advance = splat64(kLanes * stride);
  }

  [[H2_ENCODE_TARGET, gnu::always_inline]] __m256i next() {
    const __m256 mixed = _mm256_shuffle_ps(
        _mm256_castsi256_ps(mix64(low)), _mm256_castsi256_ps(mix64(high)), _MM_SHUFFLE(3, 1, 3, 1));
    low = _mm256_add_epi64(low, advance);
    high = _mm256_add_epi64(high, advance);
    return _mm256_castps_si256(mixed);
  }
};

// The multipliers of a run's steps: one per block of run.block values (at least 8, so that a
// step reaches into two blocks at most: its lanes from the boundary on take the next block's
// multiplier), or run.multiplier for all of them.
struct BlockMultipliers {
  const float* next;
  __m256 current;
  int64_t remaining;  // values of the current block from this step on
  int64_t block;

  [[H2_ENCODE_TARGET, gnu::always_inline]] explicit BlockMultipliers(const EncodeRun& run)
      : next(run.multipliers != nullptr ? run.multipliers : &run.multiplier),
        current(_mm256_set1_ps(*next++)),
        remaining(run.block),
        block(run.block) {}

  // The multipliers of the step from element i on, of n.
  [[H2_ENCODE_TARGET, gnu::always_inline]] __m256 for_step(int64_t i, int64_t n) {
    __m256 multiplier = current;
    if (remaining < kLanes && i + remaining < n) {  // the next block starts in this step's lanes
      const __m256 following = _mm256_set1_ps(*next++);
      const __m256i from_boundary = _mm256_cmpgt_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                       _mm256_set1_epi32(int(remaining) - 1));
      multiplier = _mm256_blendv_ps(current, following, _mm256_castsi256_ps(from_boundary));
      current = following;
      remaining += block;
    }
    remaining -= kLanes;
    return multiplier;
  }
};

// The running totals of a loop, per lane: the amax bits and the saturation count (at most one a
// step, so a lane's count fits 32 bits for kFlushSteps steps).
struct LaneTotals {
  static constexpr int64_t kFlushSteps = int64_t{1} << 30;
  __m256i amax, saturated;

  [[H2_ENCODE_TARGET, gnu::always_inline]] LaneTotals()
      : amax(_mm256_setzero_si256()), saturated(_mm256_setzero_si256()) {}

  [[H2_ENCODE_TARGET]] int64_t take_saturated() {
    alignas(32) std::array<uint32_t, kLanes> lanes;
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes.data()), saturated);
    saturated = _mm256_setzero_si256();
    int64_t sum = 0;
    for (uint32_t c : lanes) sum += c;
    return sum;
  }

  [[H2_ENCODE_TARGET]] uint32_t amax_bits() const {
    alignas(32) std::array<uint32_t, kLanes> lanes;
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes.data()), amax);
    return *std::max_element(lanes.begin(), lanes.end());
  }
};

// 8 values from element i on: FP32, or bf16 widened.
template <bool kBf16>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256 load_values(const void* in, int64_t i) {
  if constexpr (kBf16) {
    const __m128i halves =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(in) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(in) + i);
  }
}

// A step's 8 codes of x times multiplier (one per 32-bit lane), added to the totals.
template <class F, bool kStochastic>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m256i encode_step(__m256 x, __m256 multiplier,
                                                                    bool track_amax,
                                                                    const Constants<F>& k,
                                                                    RandomCounters& random,
                                                                    LaneTotals& totals) {
  const __m256i bits = _mm256_castps_si256(_mm256_mul_ps(x, multiplier));
  const __m256i abs = _mm256_and_si256(bits, k.abs_mask);
  if (track_amax) {  // NaN ignored
    const __m256i x_abs = _mm256_and_si256(_mm256_castps_si256(x), k.abs_mask);
    totals.amax =
        _mm256_max_epu32(totals.amax, _mm256_andnot_si256(_mm256_cmpgt_epi32(x_abs, k.inf), x_abs));
  }
  const __m256i nan = _mm256_cmpgt_epi32(abs, k.inf);
  __m256i magnitude, beyond;  // beyond: saturated or overflowed
  if constexpr (kStochastic) {
    beyond = _mm256_andnot_si256(nan, _mm256_cmpgt_epi32(abs, k.below_overflow));
    magnitude = stochastic_magnitude<F>(abs, random.next(), k);
  } else {
    // Round to nearest even carries past the largest magnitude exactly from kOverflowBits on.
    magnitude = rne_magnitude<F>(abs, k);
    beyond = _mm256_andnot_si256(nan, _mm256_cmpgt_epi32(magnitude, k.max_magnitude));
  }
  totals.saturated = _mm256_sub_epi32(totals.saturated, beyond);  // beyond is -1 where counted
  return finish<F>(bits, nan, magnitude, k);
}

// Stores a step's 8 codes at `out`: 8 bytes, or 4 bytes of E2M1 pairs (element 2j in the low
// nibble), each pair formed in the low byte of a 64-bit lane.
template <class F>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline void store_codes(__m256i codes, uint8_t* out) {
  if constexpr (F::kBits == 8) {
    const __m128i words =
        _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
  } else {
    const __m256i pairs = _mm256_or_si256(codes, _mm256_srli_epi64(codes, 28));
    const __m256i low_bytes = _mm256_shuffle_epi8(
        pairs, _mm256_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 8,
                                -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i four = _mm_unpacklo_epi16(_mm256_castsi256_si128(low_bytes),
                                            _mm256_extracti128_si256(low_bytes, 1));
    const uint32_t packed = static_cast<uint32_t>(_mm_cvtsi128_si32(four));
    std::memcpy(out, &packed, sizeof packed);
  }
}

// The loop of one run. kPerValue: run.multipliers holds one multiplier per value; otherwise
// BlockMultipliers. The run's fields are copied into locals first: the code stores may alias the
// run, and GCC would reload them every step.
template <class F, bool kStochastic, bool kBf16, bool kPerValue>
[[H2_ENCODE_TARGET]] EncodeTotals encode_loop(const EncodeRun& run) {
  const void* const in = run.in;
  const int64_t n = run.n;
  uint8_t* const out = run.out;
  const float* const per_value = run.multipliers;
  const bool track_amax = run.track_amax;
  const Constants<F> k(run.saturate);
  BlockMultipliers blocks(run);
  RandomCounters random(run);
  LaneTotals totals;
  EncodeTotals result;
  auto out_at = [out](int64_t i) { return out + (F::kBits == 8 ? i : i / 2); };
  const int64_t whole_steps_end = n - n % kLanes;
  int64_t i = 0;
  while (i < whole_steps_end) {
    const int64_t piece_end = std::min(whole_steps_end, i + LaneTotals::kFlushSteps * kLanes);
    for (; i < piece_end; i += kLanes) {
      const __m256 multiplier = kPerValue ? _mm256_loadu_ps(per_value + i) : blocks.for_step(i, n);
      const __m256i codes = encode_step<F, kStochastic>(load_values<kBf16>(in, i), multiplier,
                                                        track_amax, k, random, totals);
      store_codes<F>(codes, out_at(i));
    }
    result.saturated += totals.take_saturated();
  }
  if (i < n) {  // the tail, on zeroed copies of its values and multipliers
    const int64_t left = n - i;
    alignas(32) std::array<float, kLanes> values{}, multipliers{};
    alignas(32) std::array<uint8_t, kLanes> codes{};
    std::memcpy(values.data(), static_cast<const char*>(in) + i * (kBf16 ? 2 : 4),
                static_cast<size_t>(left * (kBf16 ? 2 : 4)));
    if (kPerValue) std::memcpy(multipliers.data(), per_value + i, static_cast<size_t>(left) * 4);
    const __m256 multiplier =
        kPerValue ? _mm256_load_ps(multipliers.data()) : blocks.for_step(i, n);
    store_codes<F>(encode_step<F, kStochastic>(load_values<kBf16>(values.data(), 0), multiplier,
                                               track_amax, k, random, totals),
                   codes.data());
    if (F::kBits == 4 && left % 2 != 0) codes[size_t(left / 2)] &= 0x0f;  // (see Shapes)
    std::memcpy(out_at(i), codes.data(),
                static_cast<size_t>(F::kBits == 8 ? left : (left + 1) / 2));
    result.saturated += totals.take_saturated();
  }
  if (track_amax) result.amax_bits = totals.amax_bits();
  return result;
}

template <class F>
[[H2_ENCODE_TARGET]] void encode_lanes(const uint32_t* bits, const uint32_t* random, int64_t n,
                                       bool saturate, uint8_t* codes) {
  const Constants<F> k(saturate);
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t left = std::min(kLanes, n - i);
    alignas(32) std::array<uint32_t, kLanes> b{}, r{}, c{};
    std::memcpy(b.data(), bits + i, static_cast<size_t>(left) * 4);
    if (random != nullptr) std::memcpy(r.data(), random + i, static_cast<size_t>(left) * 4);
    const __m256i vb = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.data()));
    const __m256i abs = _mm256_and_si256(vb, k.abs_mask);
    const __m256i magnitude =
        random != nullptr
            ? stochastic_magnitude<F>(
                  abs, _mm256_load_si256(reinterpret_cast<const __m256i*>(r.data())), k)
            : rne_magnitude<F>(abs, k);
    const __m256i nan = _mm256_cmpgt_epi32(abs, k.inf);
    _mm256_store_si256(reinterpret_cast<__m256i*>(c.data()), finish<F>(vb, nan, magnitude, k));
    for (int64_t j = 0; j < left; ++j) codes[i + j] = static_cast<uint8_t>(c[size_t(j)]);
  }
}

}  // namespace

bool avx2_takes(const EncodeRun& run) {
  return vector_path_takes(run, kLanes);
}

bool avx2_encoders_available() {
  return cpu_has_avx2();
}

EncodeTotals encode_avx2(Format f, const EncodeRun& run) {
  H2_CHECK(avx2_encoders_available(), "encode_avx2: this CPU lacks AVX2");
  H2_CHECK(avx2_takes(run), "encode_avx2: blocks of {} values are shorter than a step of 8",
           run.block);
  return with_loop_kind(f, run, "encode_avx2",
                        [&](auto format, auto stochastic, auto bf16, auto per_value) {
                          return encode_loop<decltype(format), stochastic, bf16, per_value>(run);
                        });
}

void encode_lanes_avx2(Format f, const uint32_t* bits, const uint32_t* random, int64_t n,
                       bool saturate, uint8_t* codes) {
  H2_CHECK(avx2_encoders_available(), "encode_lanes_avx2: this CPU lacks AVX2");
  with_element_format(f, "encode_lanes_avx2", [&](auto format) {
    encode_lanes<decltype(format)>(bits, random, n, saturate, codes);
  });
}

#undef H2_ENCODE_TARGET

#else  // not x86-64: the portable loops only

bool avx2_encoders_available() {
  return false;
}

bool avx2_takes(const EncodeRun&) {
  return false;
}

EncodeTotals encode_avx2(Format, const EncodeRun&) {
  H2_THROW(Error, "encode_avx2: not an x86-64 build");
}

void encode_lanes_avx2(Format, const uint32_t*, const uint32_t*, int64_t, bool, uint8_t*) {
  H2_THROW(Error, "encode_lanes_avx2: not an x86-64 build");
}

#endif

}  // namespace h2::lowp::detail
