// Low-precision element formats: E4M3 (fn), E5M2, E2M1 (packed FP4) and the E8M0 scale format.
// Conversions from FP32 round to nearest, ties to even (or stochastically), and either saturate to
// the largest finite value (CUDA's __NV_SATFINITE behaviour, the default) or follow the standard
// (Overflow::standard: E4M3 -> NaN, E5M2 -> Inf; E2M1 has neither and always saturates). NaN in
// stays NaN where the format has one (sign kept: E4M3 0x7f/0xff, E5M2 0x7e/0xfe); E2M1 has none
// and NaN becomes +6 (code 0x7), as CUDA's __nv_cvt_float_to_fp4 does. -0 keeps its sign.
// Facts and sources: docs/numerics.md. The math itself is core/lowp/format_codec.h, header-only
// and usable from CUDA device code.
//
// Scalar functions are the reference; the *_n batch functions are the vectorised production path
// and must agree with the scalar ones bit for bit (tests check every format on 10^6+ inputs).
// Codes are one byte; E2M1 uses the low nibble, and packed E2M1 buffers hold element 2i in the
// low nibble of byte i and element 2i+1 in its high nibble.
//
// Agreement with the ml_dtypes package (float8_e4m3fn, float8_e5m2, float4_e2m1fn,
// float8_e8m0fnu; tests/python/check_ml_dtypes.py, ml_dtypes 0.6.0): its casts do not saturate
// and agree with Overflow::standard on every code and on 10^6 random inputs per format, except one
// documented difference: ml_dtypes turns NaN into float4_e2m1fn as a zero of the opposite sign
// (+NaN -> -0, -NaN -> +0), where H2 gives +6 as CUDA does.
#pragma once

#include <cstdint>
#include <string_view>

namespace h2::lowp {

enum class Format : uint8_t { e4m3, e5m2, e2m1, e8m0 };

struct FormatInfo {
  std::string_view name;  // "e4m3", "e5m2", "e2m1", "e8m0"
  int bits;               // storage bits per element (4 or 8)
  int exponent_bits;
  int mantissa_bits;
  int bias;
  float max_finite;     // 448, 57344, 6, 2^127
  float min_normal;     // 2^-6, 2^-14, 1, 2^-127
  float min_subnormal;  // 2^-9, 2^-16, 0.5, (none: 2^-127)
  float unit_roundoff;  // 2^-4, 2^-3, 2^-2, (none: 0)
  bool has_inf;
  bool has_nan;
};

const FormatInfo& format_info(Format f);
// Parses "e4m3", "e5m2", "e2m1", "e8m0"; throws ConfigError naming the text otherwise.
Format parse_format(std::string_view name);

enum class Overflow : uint8_t {
  saturate,  // |x| beyond the largest finite value -> +-max_finite (Inf too); NaN stays NaN
  standard,  // the format's own answer: E4M3 NaN, E5M2 +-Inf, E8M0 NaN; E2M1 saturates
};

// ---- scalar reference ----------------------------------------------------------------------

// Round to nearest even. For E8M0 (unsigned powers of two) rounding is to the nearest power of
// two with ties (x = 1.5 * 2^e) going up, as ml_dtypes' float8_e8m0fnu rounds; FP32 subnormals
// up to 2^-127 give the smallest code (2^-127) and larger ones 2^-126 (ml_dtypes' rule, not the
// nearest power for 2^-127 < x < 1.5 * 2^-127). E8M0 has neither zero nor sign: with
// Overflow::saturate the sign is ignored and zero gives the smallest code; Overflow::standard
// gives NaN (0xff) for zero and negative inputs, as ml_dtypes does.
uint8_t encode(Format f, float x, Overflow overflow = Overflow::saturate);
float decode(Format f, uint8_t code);

// Stochastic rounding: with lo <= |x| <= hi the neighbouring grid points, rounds to hi with
// probability (|x| - lo) / (hi - lo), decided by `random_bits` (uniform 32 bits): |x| - lo in
// grid steps plus random_bits / 2^32 is truncated (0 always rounds toward zero). The probability is
// exact wherever the grid step is at most 2^32 FP32 ulps of x (all of each format's normal range),
// else a multiple of 2^-32 rounded down. Values beyond max_finite saturate (Overflow::saturate);
// with Overflow::standard the step past max_finite leads to the overflow value (E4M3 NaN, E5M2
// Inf), which |x| therefore reaches with the probability of rounding up. Not defined for E8M0
// (throws h2::Error).
uint8_t encode_stochastic(Format f, float x, uint32_t random_bits,
                          Overflow overflow = Overflow::saturate);

// Counter-based random bits: a pure function of (seed, index), so stochastic rounding is
// reproducible for a seed and an element position whatever the thread split.
uint32_t counter_random(uint64_t seed, uint64_t index);

// ---- batch (vectorised) --------------------------------------------------------------------

// What a batch encode saw: largest |x| before scaling (NaN ignored, as fmax does; Inf counts) and
// how many values were clipped: after scaling, round to nearest even would have carried them past
// the largest finite value (so they saturated or overflowed; Inf included). A value that merely
// rounds down to max_finite (E4M3: up to 464) is not counted. NaN inputs are not counted.
struct EncodeStats {
  float amax = 0;
  int64_t saturated = 0;
  // false: the encoder only counts saturation and leaves amax alone, which saves its reduction
  // (14% of an E4M3 encode) for a caller that has the amax already (the quantizer).
  bool track_amax = true;
};

// Which loops a batch encoder runs: the fastest this CPU has (explicit AVX-512 where it has
// AVX512F/BW/DQ/VL, core/lowp/encode_avx512.h, else explicit AVX2, core/lowp/encode_avx2.h) or
// the portable ones every CPU can run; the same bits either way (tests check each).
enum class EncodePath : uint8_t { fastest, portable };

// out[i] = encode(f, in[i] * multiplier) for i < n. For E2M1, `out` is packed (n+1)/2 bytes and
// an odd n leaves the last high nibble 0. When `stats` is given it is updated (saturated is
// added to; amax, while stats->track_amax, is the max with its previous value). E8M0 is not a batch
// element format (throws h2::Error).
void encode_n(Format f, const float* in, int64_t n, float multiplier, uint8_t* out,
              Overflow overflow = Overflow::saturate, EncodeStats* stats = nullptr,
              EncodePath path = EncodePath::fastest);

// As encode_n with stochastic rounding; element i uses counter_random(seed, first_index + i).
void encode_stochastic_n(Format f, const float* in, int64_t n, float multiplier, uint64_t seed,
                         uint64_t first_index, uint8_t* out, Overflow overflow = Overflow::saturate,
                         EncodeStats* stats = nullptr, EncodePath path = EncodePath::fastest);

// As encode_stochastic_n with element i using counter_random(seed, first_index + i *
// index_stride): for elements adjacent in memory that are index_stride apart in the quantized
// matrix (a transposed input encoded along its own rows).
void encode_stochastic_strided_n(Format f, const float* in, int64_t n, float multiplier,
                                 uint64_t seed, uint64_t first_index, uint64_t index_stride,
                                 uint8_t* out, Overflow overflow = Overflow::saturate,
                                 EncodeStats* stats = nullptr,
                                 EncodePath path = EncodePath::fastest);

// The values of a scaled batch encode: n FP32 values, or bf16 ones (their bit patterns), value i
// times multipliers[i / block] (block 1: one multiplier per value).
struct ScaledValues {
  const void* values = nullptr;
  bool bf16 = false;
  int64_t n = 0;
  const float* multipliers = nullptr;
  int64_t block = 1;
};

// The codes of value i * multipliers[i / block], i < n (FP32 products): the codes encode_n gives
// for those products, without writing them out first, as a quantizer's blocks need them. Stats as
// encode_n's, the amax (when tracked) of the values before scaling.
void encode_scaled_n(Format f, const ScaledValues& in, uint8_t* out,
                     Overflow overflow = Overflow::saturate, EncodeStats* stats = nullptr,
                     EncodePath path = EncodePath::fastest);

// As encode_scaled_n with stochastic rounding; element i uses counter_random(seed, first_index +
// i * index_stride).
void encode_scaled_stochastic_n(Format f, const ScaledValues& in, uint64_t seed,
                                uint64_t first_index, uint64_t index_stride, uint8_t* out,
                                Overflow overflow = Overflow::saturate,
                                EncodeStats* stats = nullptr,
                                EncodePath path = EncodePath::fastest);

// out[i] = decode(f, code of element i) * multiplier (E2M1 unpacked from `in`), i < n.
void decode_n(Format f, const uint8_t* in, int64_t n, float multiplier, float* out);

// out[i] = decode(f, code of element i) * multipliers[i / block], i < n (E2M1 unpacked from `in`,
// element 0 in the low nibble of in[0]): a row of blocks in FP32. By arithmetic in AVX2
// registers where the CPU has AVX2 and the blocks are whole steps of 8 (core/lowp/decode_avx2.h;
// the same values), else by the decode table.
void decode_blocks_n(Format f, const uint8_t* in, int64_t n, int64_t block,
                     const float* multipliers, float* out);

// out[i] = the bf16 bits of decode(f, code of element i) * multipliers[i / block] (no
// multipliers: 1), i < n: the top half of the FP32 product, which is the product itself where
// it is a bf16 number (a code's value times 1, a power of two or an E4M3 scale, as qmatmul's
// bf16 routes use it; check those callers' conditions before using it elsewhere). E2M1 codes are
// unpacked from `in` (element 0 in the low nibble of in[0]) and `block` must then be even.
// Where the CPU has AVX512BW a register-table path does most of it; the same bits.
void decode_bf16_n(Format f, const uint8_t* in, int64_t n, int64_t block, const float* multipliers,
                   uint16_t* out);
// decode_bf16_n without the AVX512BW path (what every other CPU runs): tests check both paths
// on a CPU that has it.
void decode_bf16_n_portable(Format f, const uint8_t* in, int64_t n, int64_t block,
                            const float* multipliers, uint16_t* out);

// Decode table of a format: table[code] for every code (16 entries used for E2M1). Inner loops
// of kernels index it directly.
const float* decode_table(Format f);

}  // namespace h2::lowp
