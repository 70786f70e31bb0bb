// The batch encoders' AVX-512 path (see encode_avx512.h).
//
// Shapes: 16 FP32 lanes per step; a tail of n % 16 elements runs the same step with its lanes
// masked (masked-off lanes load 0.0, whose products, 0 times the multiplier, +0, or -0 or NaN for
// a negative or non-finite one, never saturate and leave the amax alone; their codes are not
// stored, and E2M1's last high nibble of an odd length is cleared). (Masking the products
// instead, by a zero-masking multiply in every step, cost round to nearest 27%.)
// Random bits: the 16 64-bit counters key + (first_index + i * index_stride) * kCounterStep lie in
// two 8-lane vectors that advance by 16 strides a step (the same sums modulo 2^64 as the scalar
// product), go through splitmix64's finaliser and give their high halves. E2M1: codes c_2j and
// c_2j+1 are the halves of 64-bit lane j, so (lane | lane >> 28) has byte c_2j | c_2j+1 << 4 at the
// bottom, stored by a truncating 64-to-8-bit store.
//
// Why not the portable loops built for x86-64-v4: GCC vectorised them with the random counters
// multiplied per element, the codes bounced through a 64-byte buffer and the nibbles paired by
// byte shuffles, and a quantizer had to write its scaled values out first. Here stochastic
// rounding takes 0.49-0.52 ns per value instead of 0.80-0.87 on a Zen 4 core, round to nearest
// 0.21-0.23 instead of 0.31-0.36 (`h2_bench_kernels --sections encoders`), and a quantizer's pass
// over bf16 rows with their blocks' multipliers is one loop (docs/performance.md, stops 35, 37).
//
// The loop is bound by vector operations (about two 512-bit ones per cycle on Zen 4), so each
// one counts: constants stay in registers (Constants, pinned), the rebias is folded into the
// rounding addend, the sign is merged by one ternary-logic operation, and round to nearest even
// counts saturation on the rounded magnitude (one compare) rather than on the input.
#include "core/lowp/encode_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/lowp/encode_batch.h"
#include "core/lowp/format_codec.h"

namespace h2::lowp::detail {

#if defined(__x86_64__)
namespace {

#define H2_ENCODE_TARGET gnu::target("avx512f,avx512bw,avx512dq,avx512vl")

using codec::kF32AbsMask;
using codec::kF32InfBits;

[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i splat(uint32_t v) {
  return _mm512_set1_epi32(static_cast<int>(v));
}

// Shifts and conversions in their zero-masking forms, all lanes on: GCC 12 warns that the plain
// forms' undefined pass-through registers may be used uninitialised.
constexpr __mmask16 kAll16 = 0xffff;
constexpr __mmask8 kAll8 = 0xff;
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i srl32(__m512i v, unsigned n) {
  return _mm512_maskz_srli_epi32(kAll16, v, n);
}
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i sll32(__m512i v, unsigned n) {
  return _mm512_maskz_slli_epi32(kAll16, v, n);
}
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i srl64(__m512i v, unsigned n) {
  return _mm512_maskz_srli_epi64(kAll8, v, n);
}

// A vector the compiler must keep in its register: GCC 12 otherwise rebuilds some of the loop's
// constants (those it rewrites, such as a subtraction turned into the addition of a negated
// constant) from a general register on every step, a broadcast each.
// (kPin false: an ordinary constant, which the compiler drops where nothing uses it.)
template <bool kPin = true>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i pinned(__m512i v) {
  if constexpr (kPin) asm("" : "+v"(v));
  return v;
}

// The per-format constants of the rounding and finishing steps, built once before a loop: those
// of round to nearest even where kNearest, of stochastic rounding where kStochastic (a pinned
// constant is built even where the loop never reads it).
template <class F, bool kNearest = true, bool kStochastic = true>
struct Constants : RoundingConstants<F> {
  using R = RoundingConstants<F>;
  __m512i abs_mask = pinned(splat(kF32AbsMask));
  __m512i inf = pinned(splat(kF32InfBits));
  __m512i one = pinned(splat(1));
  __m512i rne_addend = pinned<kNearest>(splat(R::kRneAddend));
  __m512i normal_bias = pinned<kStochastic>(splat(R::kNormalBias));
  __m512i magic = pinned<kNearest>(splat(R::kMagicBits));
  __m512i min_normal = pinned(splat(R::kMinNormalBits));
  __m512i overflow = pinned<kStochastic>(splat(F::kOverflowBits));
  __m512i overflow_span = pinned<kStochastic>(splat(kF32InfBits - F::kOverflowBits));
  __m512i max_magnitude = pinned<kNearest>(splat(F::kMaxMagnitude));
  __m512i nan_code = pinned(splat(F::kNaNCode));
  __m512i sign_bit = pinned(splat(1u << (F::kBits - 1)));
  __m512i too_large;
  [[H2_ENCODE_TARGET, gnu::always_inline]] explicit Constants(bool saturate)
      : too_large(pinned(splat(saturate ? F::kMaxMagnitude : F::kStandardOverflow))) {}
};

// Round to nearest even: encode_rne_batch's magnitude (code without sign and overflow rule).
template <class F, bool N, bool S>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i rne_magnitude(__m512i abs,
                                                                      const Constants<F, N, S>& k) {
  static_assert(N, "round to nearest even needs its constants");
  constexpr uint32_t kDrop = RoundingConstants<F>::kDrop;
  const __m512i odd = _mm512_and_si512(srl32(abs, kDrop), k.one);
  const __m512i normal = srl32(_mm512_add_epi32(_mm512_add_epi32(abs, k.rne_addend), odd), kDrop);
  const __m512 sum = _mm512_add_ps(_mm512_castsi512_ps(abs), _mm512_castsi512_ps(k.magic));
  const __m512i subnormal = _mm512_sub_epi32(_mm512_castps_si512(sum), k.magic);
  return _mm512_mask_mov_epi32(normal, _mm512_cmplt_epu32_mask(abs, k.min_normal), subnormal);
}

// Stochastic rounding: encode_stochastic_batch's magnitude. The fraction's 32-bit threshold is
// one unsigned conversion here (AVX-512 has it; frac * 2^32 is exact and below 2^32), the same
// whole number as the portable code's two 16-bit steps.
template <class F, bool N, bool S>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i stochastic_magnitude(
    __m512i abs, __m512i random, const Constants<F, N, S>& k) {
  static_assert(S, "stochastic rounding needs its constants");
  constexpr uint32_t kDrop = RoundingConstants<F>::kDrop;
  const __m512i normal = _mm512_sub_epi32(
      srl32(_mm512_add_epi32(abs, srl32(random, 32 - kDrop)), kDrop), k.normal_bias);
  const __mmask16 subnormal_target = _mm512_cmplt_epu32_mask(abs, k.min_normal);
  // (Lanes past the subnormal range, NaN included, compute garbage here that the final select
  // drops; the conversions do not trap.) fraction: y - trunc(y), one VREDUCEPS.
  const __m512 y =
      _mm512_mul_ps(_mm512_castsi512_ps(abs), _mm512_set1_ps(RoundingConstants<F>::kQuantaPerUnit));
  const __m512i whole = _mm512_maskz_cvttps_epi32(kAll16, y);
  const __m512 fraction = _mm512_maskz_reduce_ps(kAll16, y, _MM_FROUND_TO_ZERO);
  const __m512i threshold =
      _mm512_maskz_cvttps_epu32(kAll16, _mm512_mul_ps(fraction, _mm512_set1_ps(0x1p32f)));
  const __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_xor_si512(random, splat(~0u)), threshold);
  const __m512i subnormal = _mm512_mask_add_epi32(whole, up, whole, k.one);
  return _mm512_mask_mov_epi32(normal, subnormal_target, subnormal);
}

// finish_code: the overflow rule (too_large: the saturating or the standard code), NaN, sign.
// Every format's standard code is its largest magnitude or the next one (E4M3's NaN, E5M2's
// Inf, E2M1's 6), so the rule is an unsigned min: one operation and no mask register, which
// Zen 4 has few ports for. The sign comes from bits >> (32 - kBits), whose top code bit is the
// sign, merged by one ternary-logic operation (code | (shifted & sign_bit)). E2M1's NaN code is
// its too_large either way, so its NaN lanes are already coded, less the sign. number: the lanes
// that are not NaN.
template <class F, bool N, bool S>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i finish(__m512i bits, __mmask16 number,
                                                               __m512i magnitude,
                                                               const Constants<F, N, S>& k) {
  static_assert(F::kStandardOverflow == F::kMaxMagnitude ||
                F::kStandardOverflow == F::kMaxMagnitude + 1);
  constexpr int kOrAnd = 0xf8;  // A | (B & C)
  const __m512i finite = _mm512_maskz_min_epu32(kAll16, magnitude, k.too_large);
  const __m512i shifted = srl32(bits, 32 - F::kBits);
  if constexpr (F::kNaNKeepsSign) {
    const __m512i code = _mm512_mask_mov_epi32(k.nan_code, number, finite);
    return _mm512_maskz_ternarylogic_epi32(kAll16, code, shifted, k.sign_bit, kOrAnd);
  } else {
    static_assert(F::kNaNCode == F::kMaxMagnitude && F::kNaNCode == F::kStandardOverflow);
    return _mm512_mask_ternarylogic_epi32(finite, number, shifted, k.sign_bit, kOrAnd);
  }
}

// The high 32 bits of splitmix64's finaliser of 16 counters (two 8-lane halves), as 16 lanes.
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i mix64(__m512i z) {
  z = _mm512_xor_si512(z, srl64(z, 30));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ull)));
  z = _mm512_xor_si512(z, srl64(z, 27));
  z = _mm512_mullo_epi64(z, _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebull)));
  return _mm512_xor_si512(z, srl64(z, 31));
}
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512i random_bits(__m512i low, __m512i high) {
  const __m512i odd_halves =
      _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi32(mix64(low), odd_halves, mix64(high));
}

// 16 values from element i on (masked lanes 0.0): FP32, or bf16 widened.
template <bool kBf16>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline __m512 load_values(const void* in, int64_t i,
                                                                   __mmask16 lanes) {
  if constexpr (kBf16) {
    const __m256i halves = _mm256_maskz_loadu_epi16(lanes, static_cast<const uint16_t*>(in) + i);
    return _mm512_castsi512_ps(sll32(_mm512_maskz_cvtepu16_epi32(kAll16, halves), 16));
  } else {
    return _mm512_maskz_loadu_ps(lanes, static_cast<const float*>(in) + i);
  }
}

// Stores a step's 16 codes (one byte each, or E2M1 pairs in the low byte of each 64-bit lane):
// whole steps by a register narrowing and a plain store (the masked narrowing store is several
// times slower on Zen 4), the last partial one masked.
template <class F>
[[H2_ENCODE_TARGET, gnu::always_inline]] inline void store_codes(__m512i codes, uint8_t* out,
                                                                 int64_t i, int64_t left) {
  if constexpr (F::kBits == 8) {
    if (left >= 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm512_maskz_cvtepi32_epi8(kAll16, codes));
    } else {
      _mm512_mask_cvtepi32_storeu_epi8(out + i, __mmask16((1u << left) - 1u), codes);
    }
  } else {
    if (left >= 16) {
      const __m512i pairs = _mm512_or_si512(codes, srl64(codes, 28));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i / 2),
                       _mm512_maskz_cvtepi64_epi8(kAll8, pairs));
    } else {
      // The lanes past the end coded 0 first: an odd length's last high nibble is one of them.
      const __m512i own = _mm512_maskz_mov_epi32(__mmask16((1u << left) - 1u), codes);
      const int64_t bytes = (left + 1) / 2;
      _mm512_mask_cvtepi64_storeu_epi8(out + i / 2, __mmask8((1u << bytes) - 1u),
                                       _mm512_or_si512(own, srl64(own, 28)));
    }
  }
}

// The loop of one run. kPerValue: run.multipliers holds one multiplier per value; otherwise one
// per block of run.block values (at least 16, so that a step reaches into two blocks at most:
// its lanes from the boundary on take the next block's multiplier), or run.multiplier for all of
// them. The run's fields are copied into locals first: the code stores may alias the run, and GCC
// would reload them every step.
template <class F, bool kStochastic, bool kBf16, bool kPerValue>
[[H2_ENCODE_TARGET]] EncodeTotals encode_loop(const EncodeRun& run) {
  const void* const in = run.in;
  const int64_t n = run.n, block = run.block;
  uint8_t* const out = run.out;
  const float* const per_value = run.multipliers;
  const bool track_amax = run.track_amax;
  const Constants<F, !kStochastic, kStochastic> k(run.saturate);
  // One multiplier per block: the next block's, the current one and how many of the current
  // block's values are left from this step on.
  const float* next_multiplier = run.multipliers != nullptr ? run.multipliers : &run.multiplier;
  __m512 current = _mm512_set1_ps(*next_multiplier++);
  int64_t remaining = block;
  // Counters of lanes 0-7 and 8-15, and their advance per step (all modulo 2^64).
  const uint64_t stride = run.index_stride * codec::kCounterStep;
  __m512i counter_low = _mm512_setzero_si512(), counter_high = _mm512_setzero_si512();
  if constexpr (kStochastic) {
    const uint64_t base = run.key + run.first_index * codec::kCounterStep;
    const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    counter_low =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(base)),
                         _mm512_mullo_epi64(lane, _mm512_set1_epi64(static_cast<int64_t>(stride))));
    counter_high =
        _mm512_add_epi64(counter_low, _mm512_set1_epi64(static_cast<int64_t>(8 * stride)));
  }
  const __m512i advance = _mm512_set1_epi64(static_cast<int64_t>(16 * stride));
  __m512i amax = _mm512_setzero_si512();
  int64_t saturated = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 lanes = left >= 16 ? kAll16 : __mmask16((1u << left) - 1u);
    const __m512 x = load_values<kBf16>(in, i, lanes);
    __m512 multiplier = current;
    if constexpr (kPerValue) {
      multiplier = _mm512_maskz_loadu_ps(lanes, per_value + i);
    } else {
      if (remaining < 16 && i + remaining < n) {  // the next block starts in this step's lanes
        const __m512 following = _mm512_set1_ps(*next_multiplier++);
        multiplier = remaining == 0
                         ? following  // (blocks of whole steps: no blend)
                         : _mm512_mask_mov_ps(current, __mmask16(0xffffu << remaining), following);
        current = following;
        remaining += block;
      }
      remaining -= 16;
    }
    const __m512i bits = _mm512_castps_si512(_mm512_mul_ps(x, multiplier));
    const __m512i abs = _mm512_and_si512(bits, k.abs_mask);
    if (track_amax) {  // NaN ignored
      const __m512i x_abs = _mm512_and_si512(_mm512_castps_si512(x), k.abs_mask);
      amax = _mm512_mask_max_epu32(amax, _mm512_cmple_epu32_mask(x_abs, k.inf), amax, x_abs);
    }
    const __mmask16 number = _mm512_cmple_epu32_mask(abs, k.inf);  // not NaN
    __m512i magnitude;
    __mmask16 beyond;  // saturated or overflowed
    if constexpr (kStochastic) {
      // kOverflowBits <= abs <= Inf as one unsigned compare of abs - kOverflowBits.
      beyond = _mm512_cmple_epu32_mask(_mm512_sub_epi32(abs, k.overflow), k.overflow_span);
      magnitude = stochastic_magnitude<F>(abs, random_bits(counter_low, counter_high), k);
      counter_low = _mm512_add_epi64(counter_low, advance);
      counter_high = _mm512_add_epi64(counter_high, advance);
    } else {
      // Round to nearest even carries past the largest magnitude exactly from kOverflowBits on.
      magnitude = rne_magnitude<F>(abs, k);
      beyond = _mm512_mask_cmpgt_epu32_mask(number, magnitude, k.max_magnitude);
    }
    saturated += std::popcount(static_cast<uint32_t>(beyond));
    store_codes<F>(finish<F>(bits, number, magnitude, k), out, i, left);
  }
  EncodeTotals totals;
  totals.saturated = saturated;
  if (run.track_amax) {  // (not _mm512_reduce_max_epu32, whose extracts GCC 12 warns about)
    alignas(64) uint32_t lane_amax[16];
    _mm512_store_si512(lane_amax, amax);
    totals.amax_bits = *std::max_element(lane_amax, lane_amax + 16);
  }
  return totals;
}

template <class F>
[[H2_ENCODE_TARGET]] void encode_lanes(const uint32_t* bits, const uint32_t* random, int64_t n,
                                       bool saturate, uint8_t* codes) {
  const Constants<F> k(saturate);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1u);
    const __m512i b = _mm512_maskz_loadu_epi32(lanes, bits + i);
    const __m512i abs = _mm512_and_si512(b, k.abs_mask);
    const __m512i magnitude =
        random != nullptr
            ? stochastic_magnitude<F>(abs, _mm512_maskz_loadu_epi32(lanes, random + i), k)
            : rne_magnitude<F>(abs, k);
    const __mmask16 number = _mm512_cmple_epu32_mask(abs, k.inf);
    _mm512_mask_cvtepi32_storeu_epi8(codes + i, lanes, finish<F>(b, number, magnitude, k));
  }
}

}  // namespace

bool avx512_takes(const EncodeRun& run) {
  return vector_path_takes(run, 16);
}

bool avx512_encoders_available() {
  // Once: the strips ask for every row of 256 values.
  static const bool available = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw) &&
                                cpu_has(CpuFeature::avx512dq) && cpu_has(CpuFeature::avx512vl);
  return available;
}

EncodeTotals encode_avx512(Format f, const EncodeRun& run) {
  H2_CHECK(avx512_encoders_available(), "encode_avx512: this CPU lacks AVX512F/BW/DQ/VL");
  H2_CHECK(avx512_takes(run), "encode_avx512: blocks of {} values are shorter than a step of 16",
           run.block);
  return with_loop_kind(f, run, "encode_avx512",
                        [&](auto format, auto stochastic, auto bf16, auto per_value) {
                          return encode_loop<decltype(format), stochastic, bf16, per_value>(run);
                        });
}

void encode_lanes_avx512(Format f, const uint32_t* bits, const uint32_t* random, int64_t n,
                         bool saturate, uint8_t* codes) {
  H2_CHECK(avx512_encoders_available(), "encode_lanes_avx512: this CPU lacks AVX512F/BW/DQ/VL");
  with_element_format(f, "encode_lanes_avx512", [&](auto format) {
    encode_lanes<decltype(format)>(bits, random, n, saturate, codes);
  });
}

#undef H2_ENCODE_TARGET

#else  // not x86-64: the portable loops only

bool avx512_encoders_available() {
  return false;
}

bool avx512_takes(const EncodeRun&) {
  return false;
}

EncodeTotals encode_avx512(Format, const EncodeRun&) {
  H2_THROW(Error, "encode_avx512: not an x86-64 build");
}

void encode_lanes_avx512(Format, const uint32_t*, const uint32_t*, int64_t, bool, uint8_t*) {
  H2_THROW(Error, "encode_lanes_avx512: not an x86-64 build");
}

#endif

}  // namespace h2::lowp::detail
