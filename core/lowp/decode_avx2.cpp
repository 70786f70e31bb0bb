// The FP32 batch decoder's AVX2 path (see decode_avx2.h).
//
// Shapes: 8 codes per step, each step inside one block (blocks are whole steps, or one block
// holds the run), so a block's multiplier is one broadcast. Byte formats by arithmetic on the
// code, as codec::decode computes it: a normal code's exponent and mantissa fields moved onto
// FP32's plus the rebias; a subnormal one's mantissa converted and times the format's smallest
// quantum (exact); codes past the largest finite one NaN, E5M2's first one Inf; the sign moved
// to bit 31; where a run of 32 codes has none past the largest finite one (one test of their
// bytes), its steps skip those cases. E2M1: its 8 magnitudes in one register, indexed by a permute
// (which reads the low 3 bits of each lane), the nibbles of 4 bytes spread to 8 lanes first (each
// byte twice, the copy of an odd element shifted right by 4).
//
// Why: qmatmul's FP32 route decodes its code tiles a row at a time, and a table lookup per code
// with a call per block took 12.5% of an nvfp4 training step on the AVX2 path (blocks of 16
// values; docs/performance.md, stop 43).
#include "core/lowp/decode_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/lowp/encode_batch.h"
#include "core/lowp/format_codec.h"

namespace h2::lowp::detail {

#if defined(__x86_64__)
namespace {

#define H2_DECODE_TARGET gnu::target("avx2")

[[H2_DECODE_TARGET, gnu::always_inline]] inline __m256i splat(uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

// The FP32 bit patterns of a step's 8 codes of a byte format (before the multiplier).
template <class F>
struct ByteDecoder {
  __m256i magnitude_mask = splat(0x7f), sign_bit = splat(0x80);
  __m256i rebias = splat((127u - F::kBias) << 23);
  __m256i first_normal = splat(1u << F::kMantissaBits);
  __m256 quantum = _mm256_castsi256_ps(splat((128u - F::kBias - F::kMantissaBits) << 23));
  __m256i max_magnitude = splat(F::kMaxMagnitude);
  __m256i first_special = splat(F::kMaxMagnitude + 1);
  __m256i first_special_bits = splat(F::kHasInf ? codec::kF32InfBits : codec::kF32QuietNaN);
  __m256i nan = splat(codec::kF32QuietNaN);

  [[H2_DECODE_TARGET, gnu::always_inline]] ByteDecoder() {}

  // Finite: whether the caller knows every code of the step is finite (any_special is false).
  template <bool Finite = false>
  [[H2_DECODE_TARGET, gnu::always_inline]] __m256 step(const uint8_t* in) const {
    const __m256i code =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in)));
    const __m256i magnitude = _mm256_and_si256(code, magnitude_mask);
    const __m256i normal =
        _mm256_add_epi32(_mm256_slli_epi32(magnitude, 23 - F::kMantissaBits), rebias);
    const __m256i subnormal =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), quantum));
    __m256i abs =
        _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(first_normal, magnitude));
    if (!Finite) {
      const __m256i special =
          _mm256_blendv_epi8(nan, first_special_bits, _mm256_cmpeq_epi32(magnitude, first_special));
      abs = _mm256_blendv_epi8(abs, special, _mm256_cmpgt_epi32(magnitude, max_magnitude));
    }
    return _mm256_castsi256_ps(
        _mm256_or_si256(abs, _mm256_slli_epi32(_mm256_and_si256(code, sign_bit), 24)));
  }

  // Whether any of the 32 codes at `in` is past the largest finite one (NaN, or E5M2's Inf): one
  // test of bytes, so that runs of finite codes (what the encoders write) skip the special
  // cases' two compares and blends per step.
  [[H2_DECODE_TARGET, gnu::always_inline]] static bool any_special(const uint8_t* in) {
    const __m256i magnitudes = _mm256_and_si256(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)), _mm256_set1_epi8(0x7f));
    const __m256i past = _mm256_cmpgt_epi8(magnitudes, _mm256_set1_epi8(F::kMaxMagnitude));
    return _mm256_movemask_epi8(past) != 0;
  }
};

// The FP32 values of a step's 8 E2M1 codes (4 bytes from `in`).
struct E2M1Decoder {
  __m256 magnitudes;
  __m256i nibble_shift = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
  __m256i sign_bit = splat(0x8);

  [[H2_DECODE_TARGET, gnu::always_inline]] E2M1Decoder()
      : magnitudes(_mm256_setr_ps(codec::decode<codec::E2M1>(0), codec::decode<codec::E2M1>(1),
                                  codec::decode<codec::E2M1>(2), codec::decode<codec::E2M1>(3),
                                  codec::decode<codec::E2M1>(4), codec::decode<codec::E2M1>(5),
                                  codec::decode<codec::E2M1>(6), codec::decode<codec::E2M1>(7))) {}

  [[H2_DECODE_TARGET, gnu::always_inline]] __m256 step(const uint8_t* in) const {
    uint32_t four;
    std::memcpy(&four, in, sizeof four);
    const __m128i bytes = _mm_cvtsi32_si128(static_cast<int>(four));
    const __m256i code =
        _mm256_srlv_epi32(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes)), nibble_shift);
    const __m256 abs = _mm256_permutevar8x32_ps(magnitudes, code);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, sign_bit), 28);
    return _mm256_or_ps(abs, _mm256_castsi256_ps(sign));
  }
};

template <class F>
[[H2_DECODE_TARGET]] int64_t decode_blocks(const uint8_t* in, int64_t n, int64_t block,
                                           const float* multipliers, float* out) {
  const std::conditional_t<F::kBits == 8, ByteDecoder<F>, E2M1Decoder> decoder;
  const int64_t steps_end = n - n % 8;
  int64_t i = 0;
  for (const float* m = multipliers; i < steps_end; ++m) {
    const __m256 multiplier = _mm256_set1_ps(*m);
    const int64_t block_end = i + std::min(steps_end - i, block);
    if constexpr (F::kBits == 8) {
      for (; i + 32 <= block_end; i += 32) {
        if (decoder.any_special(in + i)) {
          for (int64_t s = i; s < i + 32; s += 8)
            _mm256_storeu_ps(out + s, _mm256_mul_ps(decoder.step(in + s), multiplier));
        } else {
          for (int64_t s = i; s < i + 32; s += 8)
            _mm256_storeu_ps(out + s,
                             _mm256_mul_ps(decoder.template step<true>(in + s), multiplier));
        }
      }
    }
    for (; i < block_end; i += 8) {
      const __m256 values = decoder.step(in + (F::kBits == 8 ? i : i / 2));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(values, multiplier));
    }
  }
  return steps_end;
}

}  // namespace

int64_t decode_blocks_avx2(Format f, const uint8_t* in, int64_t n, int64_t block,
                           const float* multipliers, float* out) {
  H2_CHECK(cpu_has_avx2(), "decode_blocks_avx2: this CPU lacks AVX2");
  H2_CHECK(block % 8 == 0 || block >= n, "decode_blocks_avx2: blocks of {} are not whole steps",
           block);
  return with_element_format(f, "decode_blocks_avx2", [&](auto format) {
    return decode_blocks<decltype(format)>(in, n, block, multipliers, out);
  });
}

#undef H2_DECODE_TARGET

#else  // not x86-64: the table only

int64_t decode_blocks_avx2(Format, const uint8_t*, int64_t, int64_t, const float*, float*) {
  H2_THROW(Error, "decode_blocks_avx2: not an x86-64 build");
}

#endif

}  // namespace h2::lowp::detail
