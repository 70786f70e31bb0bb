// Low-precision element formats (core/lowp/formats.h): format facts and names, the scalar
// reference (a thin layer over format_codec.h), decode tables, the batch decoders to FP32 (their
// AVX2 path is decode_avx2.cpp) and to bf16, which take a register-table path where the CPU has
// AVX512BW. The batch encoders are encode_batch.cpp, encode_avx512.cpp and encode_avx2.cpp.
#include "core/lowp/formats.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/lowp/decode_avx2.h"
#include "core/lowp/encode_batch.h"
#include "core/lowp/format_codec.h"

namespace h2::lowp {
namespace {

using codec::E2M1;
using codec::E4M3;
using codec::E5M2;
using codec::float_bits;
using detail::saturates;
using detail::with_element_format;

constexpr std::array<FormatInfo, 4> kFormatInfos = {{
    {"e4m3", 8, 4, 3, 7, 448.0f, 0x1p-6f, 0x1p-9f, 0x1p-4f, false, true},
    {"e5m2", 8, 5, 2, 15, 57344.0f, 0x1p-14f, 0x1p-16f, 0x1p-3f, true, true},
    {"e2m1", 4, 2, 1, 1, 6.0f, 1.0f, 0.5f, 0x1p-2f, false, false},
    {"e8m0", 8, 8, 0, 127, 0x1p127f, 0x1p-127f, 0x1p-127f, 0.0f, false, true},
}};

size_t index_of(Format f) {
  return static_cast<size_t>(f);
}

// ---- batch decoding to bf16 -------------------------------------------------------------------

// The bf16 bits of both E2M1 codes of each byte, element 2i (low nibble) in the low half.
using E2M1PairTable = std::array<uint32_t, 256>;

const E2M1PairTable& e2m1_bf16_pairs() {
  static const E2M1PairTable table = [] {
    E2M1PairTable t{};
    for (uint32_t b = 0; b < 256; ++b)
      t[b] = codec::decode_bf16_bits<E2M1>(b & 15u) | codec::decode_bf16_bits<E2M1>(b >> 4) << 16;
    return t;
  }();
  return table;
}

// out[i] = bf16 bits of decode(code i), i < n: one integer loop, vectorised (byte formats), or
// one table lookup per byte for both of its elements (E2M1: faster than the arithmetic on
// nibbles).
template <class F>
void decode_bf16_codes(const uint8_t* in, int64_t n, uint16_t* out) {
  if constexpr (F::kBits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i] = uint16_t(codec::decode_bf16_bits<F>(in[i]));
  } else {  // an odd n ends on a low nibble
    const E2M1PairTable& pairs = e2m1_bf16_pairs();
    for (int64_t j = 0; j < n / 2; ++j) std::memcpy(out + 2 * j, &pairs[in[j]], sizeof(uint32_t));
    if (n % 2 != 0) out[n - 1] = uint16_t(pairs[in[n / 2]] & 0xffffu);
  }
}

// v[i] = bf16 bits of (v[i] * multiplier), i < n. (A compile-time n of 16 made GCC unroll the
// loop into scalar code; a run-time n vectorises.)
void scale_bf16(uint16_t* v, int64_t n, float multiplier) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = codec::bits_float(uint32_t(v[i]) << 16) * multiplier;
    v[i] = uint16_t(float_bits(x) >> 16);
  }
}

#if defined(__x86_64__)
// 16 bf16 values times m, as scale_bf16 computes them (FP32 product, its top 16 bits). (The
// zero-masking forms of the intrinsics: GCC 12 warns that the plain ones' undefined
// pass-through registers may be used uninitialised.)
[[gnu::target("avx512f,avx512bw")]] inline __m256i scale16(__m256i v, float m) {
  constexpr __mmask16 kAll = 0xffff;
  const __m512i widened = _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, v), 16);
  const __m512 product = _mm512_mul_ps(_mm512_castsi512_ps(widened), _mm512_set1_ps(m));
  return _mm512_maskz_cvtepi32_epi16(
      kAll, _mm512_maskz_srli_epi32(kAll, _mm512_castps_si512(product), 16));
}

// decode_bf16_n for whole groups of 32 elements where the CPU has AVX512BW (chosen at run time,
// whatever the build's -march); returns how many elements it did (the caller does the rest).
// Each code widened to 16 bits indexes a table in registers: a byte format's 128 magnitudes in
// four (two 64-entry permutes, the upper half picked by bit 6; the sign bit moved to bit 15),
// E2M1's 16 codes in one (the nibbles of 16 bytes spread to 32 lanes first). Each half of 16
// then times its block's multiplier (blocks a multiple of 16), as scale_bf16 does: byte codes
// after the lookup; E2M1 codes through a table already scaled (the 16 values times each half's
// multiplier, 32 products narrowed by one permute), which halved the time of an nvfp4 decode,
// 0.116 -> 0.059 ns per value on a Zen 4 core. The tables are made by decode_bf16_bits, so the
// bits are the integer loop's.
[[gnu::target("avx512f,avx512bw"), gnu::noinline]] int64_t decode_bf16_avx512(
    const uint8_t* in, int64_t n, bool nibbles, const uint16_t* table, int64_t block,
    const float* multipliers, uint16_t* out) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 32);
  const __m512i t2 = _mm512_loadu_si512(table + 64), t3 = _mm512_loadu_si512(table + 96);
  const __m512i bit6 = _mm512_set1_epi16(0x40), sign = _mm512_set1_epi16(int16_t(0x80));
  const __m128i low_nibble = _mm_set1_epi8(0x0f);
  // The multiplier of the next 16 values, advanced a block at a time: a division per half cost
  // more than the rest of the step (two 64-bit idivs per 32 values).
  const float* multiplier = multipliers;
  const int64_t halves_per_block = block / 16;
  int64_t half_in_block = 0;
  auto next_multiplier = [&] {
    const float m = *multiplier;
    if (++half_in_block == halves_per_block) {
      half_in_block = 0;
      ++multiplier;
    }
    return m;
  };
  // E2M1 with multipliers: the 16 code values as FP32 (t0's first 16 entries widened); per 32
  // elements the two halves' tables times their multipliers, narrowed to a 32-entry bf16 table
  // by picking each product's top half (exact: see scale16), which the codes, the second half's
  // offset by 16, then index.
  constexpr __mmask16 kAll16 = 0xffff;
  const __m512 e2m1_values = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
      kAll16,
      _mm512_maskz_cvtepu16_epi32(kAll16, _mm512_maskz_extracti64x4_epi64(__mmask8(0xff), t0, 0)),
      16));
  const __m512i top_halves =
      _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i second_half =
      _mm512_set_epi16(16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0,
                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512i value;
    if (nibbles) {  // element 2j is the low nibble of byte j
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i / 2));
      const __m128i lo = _mm_and_si128(packed, low_nibble);
      const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low_nibble);
      const __m256i bytes = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
      const __m512i codes = _mm512_cvtepu8_epi16(bytes);
      if (multipliers != nullptr) {
        const __m512 first = _mm512_mul_ps(e2m1_values, _mm512_set1_ps(next_multiplier()));
        const __m512 second = _mm512_mul_ps(e2m1_values, _mm512_set1_ps(next_multiplier()));
        const __m512i table = _mm512_permutex2var_epi16(_mm512_castps_si512(first), top_halves,
                                                        _mm512_castps_si512(second));
        _mm512_storeu_si512(out + i,
                            _mm512_permutexvar_epi16(_mm512_or_si512(codes, second_half), table));
        continue;
      }
      value = _mm512_permutexvar_epi16(codes, t0);
    } else {
      const __m512i codes =
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
      const __m512i lower = _mm512_permutex2var_epi16(t0, codes, t1);  // magnitudes 0-63
      const __m512i upper = _mm512_permutex2var_epi16(t2, codes, t3);  // 64-127
      const __m512i magnitude =
          _mm512_mask_mov_epi16(lower, _mm512_test_epi16_mask(codes, bit6), upper);
      value = _mm512_or_si512(magnitude, _mm512_slli_epi16(_mm512_and_si512(codes, sign), 8));
    }
    if (multipliers == nullptr) {
      _mm512_storeu_si512(out + i, value);
      continue;
    }
    // (The half index must be a constant for Clang's intrinsic.)
    const __m256i halves[2] = {_mm512_maskz_extracti64x4_epi64(__mmask8(0xff), value, 0),
                               _mm512_maskz_extracti64x4_epi64(__mmask8(0xff), value, 1)};
    for (int h = 0; h < 2; ++h) {
      const float m = next_multiplier();
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16 * h),
                          m != 1.0f ? scale16(halves[h], m) : halves[h]);
    }
  }
  return i;
}

// The register table of format F for decode_bf16_avx512: magnitudes, or E2M1's 16 codes.
template <class F>
const std::array<uint16_t, 128>& avx512_table() {
  static const std::array<uint16_t, 128> table = [] {
    std::array<uint16_t, 128> t{};
    const uint32_t entries = F::kBits == 8 ? 128 : 16;
    for (uint32_t c = 0; c < entries; ++c) t[c] = uint16_t(codec::decode_bf16_bits<F>(c));
    return t;
  }();
  return table;
}
#endif

// ---- decode tables ----------------------------------------------------------------------------

using DecodeTable = std::array<float, 256>;

template <class Decode>
DecodeTable make_table(Decode decode_code) {
  DecodeTable table{};
  for (uint32_t code = 0; code < 256; ++code) table[code] = decode_code(code);
  return table;
}

}  // namespace

const FormatInfo& format_info(Format f) {
  H2_CHECK(index_of(f) < kFormatInfos.size(), "unknown format {}", index_of(f));
  return kFormatInfos[index_of(f)];
}

Format parse_format(std::string_view name) {
  for (size_t i = 0; i < kFormatInfos.size(); ++i) {
    if (kFormatInfos[i].name == name) return static_cast<Format>(i);
  }
  H2_THROW(ConfigError, "unknown low-precision format '{}' (valid: e4m3, e5m2, e2m1, e8m0)", name);
}

uint8_t encode(Format f, float x, Overflow overflow) {
  const uint32_t bits = float_bits(x);
  const bool saturate = saturates(overflow);
  if (f == Format::e8m0) return static_cast<uint8_t>(codec::encode_e8m0(bits, saturate));
  return with_element_format(f, "encode", [&](auto format) {
    return static_cast<uint8_t>(codec::encode_rne<decltype(format)>(bits, saturate));
  });
}

float decode(Format f, uint8_t code) {
  if (f == Format::e8m0) return codec::decode_e8m0(code);
  return with_element_format(f, "decode",
                             [&](auto format) { return codec::decode<decltype(format)>(code); });
}

uint8_t encode_stochastic(Format f, float x, uint32_t random_bits, Overflow overflow) {
  return with_element_format(f, "encode_stochastic", [&](auto format) {
    return static_cast<uint8_t>(codec::encode_stochastic<decltype(format)>(
        float_bits(x), random_bits, saturates(overflow)));
  });
}

uint32_t counter_random(uint64_t seed, uint64_t index) {
  return codec::counter_random(seed, index);
}

void decode_n(Format f, const uint8_t* in, int64_t n, float multiplier, float* out) {
  decode_blocks_n(f, in, n, std::max<int64_t>(n, 1), &multiplier, out);
}

void decode_blocks_n(Format f, const uint8_t* in, int64_t n, int64_t block,
                     const float* multipliers, float* out) {
  H2_CHECK(block > 0, "decode_blocks_n: block {} must be positive", block);
  int64_t done = 0;  // elements decoded by the AVX2 path
  if (f != Format::e8m0 && (block % 8 == 0 || block >= n) && cpu_has_avx2())
    done = detail::decode_blocks_avx2(f, in, n, block, multipliers, out);
  const float* table = decode_table(f);
  for (int64_t i = done; i < n; ++i) {
    const uint32_t code = f == Format::e2m1 ? (in[i / 2] >> ((i & 1) * 4)) & 0xfu : in[i];
    out[i] = table[code] * multipliers[i / block];
  }
}

namespace {

// decode_bf16_n, with the AVX512BW path where allowed and the CPU has it (called through
// in_fastest_build, which compiles it twice).
void decode_bf16(Format f, const uint8_t* in, int64_t n, int64_t block, const float* multipliers,
                 uint16_t* out, bool allow_avx512) {
  H2_CHECK(multipliers == nullptr || (block > 0 && (f != Format::e2m1 || block % 2 == 0)),
           "decode_bf16_n: block {} must be positive (and even for e2m1)", block);
  // E2M1 codes are scaled as the AVX512BW path decodes them (blocks a multiple of 16); byte codes
  // after it, by the loop below, which is faster for them (the decode alone is 4x the integer
  // loop's speed, and the scaling pass then vectorises on its own).
  const bool fused = multipliers != nullptr && f == Format::e2m1 && block % 16 == 0;
  int64_t done = 0;  // elements decoded by the AVX512BW path
  with_element_format(f, "decode_bf16_n", [&](auto format) {
    using F = decltype(format);
#if defined(__x86_64__)
    if (allow_avx512 && cpu_has_avx512bw())
      done = decode_bf16_avx512(in, n, F::kBits == 4, avx512_table<F>().data(), block,
                                fused ? multipliers : nullptr, out);
#endif
    const int64_t first_byte = F::kBits == 4 ? done / 2 : done;  // done is a multiple of 32
    decode_bf16_codes<F>(in + first_byte, n - done, out + done);
  });
  if (multipliers == nullptr) return;
  // Then what is not scaled yet, each block's part times its multiplier, in place while in L1:
  // first the rest of a block the fused path split, then whole blocks (a loop in this form: one
  // that computed each block's end instead ran the E4M3 scaling 1.7x slower).
  int64_t b0 = fused ? done : 0;
  if (b0 % block != 0) {
    const float m = multipliers[b0 / block];
    const int64_t b1 = std::min(n, (b0 / block + 1) * block);
    if (m != 1.0f) scale_bf16(out + b0, b1 - b0, m);
    b0 = b1;
  }
  for (; b0 < n; b0 += block) {
    const float m = multipliers[b0 / block];
    if (m != 1.0f) scale_bf16(out + b0, std::min(block, n - b0), m);
  }
}

}  // namespace

void decode_bf16_n(Format f, const uint8_t* in, int64_t n, int64_t block, const float* multipliers,
                   uint16_t* out) {
  in_fastest_build([&] { decode_bf16(f, in, n, block, multipliers, out, true); });
}

void decode_bf16_n_portable(Format f, const uint8_t* in, int64_t n, int64_t block,
                            const float* multipliers, uint16_t* out) {
  in_fastest_build([&] { decode_bf16(f, in, n, block, multipliers, out, false); });
}

const float* decode_table(Format f) {
  static const std::array<DecodeTable, 4> tables = {
      make_table([](uint32_t c) { return codec::decode<E4M3>(c); }),
      make_table([](uint32_t c) { return codec::decode<E5M2>(c); }),
      make_table([](uint32_t c) { return codec::decode<E2M1>(c); }),
      make_table([](uint32_t c) { return codec::decode_e8m0(c); }),
  };
  H2_CHECK(index_of(f) < tables.size(), "unknown format {}", index_of(f));
  return tables[index_of(f)].data();
}

}  // namespace h2::lowp
