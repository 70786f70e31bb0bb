// The batch encoders of core/lowp/formats.h: each call is one EncodeRun (encode_batch.h), taken
// by the AVX-512 loops (encode_avx512.cpp) or the AVX2 ones (encode_avx2.cpp), the widest the CPU
// has, else by the portable loops here: chunks of 64 elements with branch-free bodies that GCC
// vectorises, counting saturation (and, when asked, gathering the amax) in the same pass. bf16
// values and per-block multipliers reach the portable loops as chunks of FP32 products.
#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/lowp/encode_avx2.h"
#include "core/lowp/encode_avx512.h"
#include "core/lowp/encode_batch.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/formats.h"

namespace h2::lowp {

namespace {

using codec::float_bits;
using detail::avx2_encoders_available;
using detail::avx2_takes;
using detail::avx512_encoders_available;
using detail::avx512_takes;
using detail::encode_avx2;
using detail::encode_avx512;
using detail::EncodeRun;
using detail::EncodeTotals;
using detail::saturates;
using detail::with_element_format;

constexpr int64_t kChunk = 64;

// |x| as bits for the amax: NaN counts as 0 (amax ignores NaN, as fmax does). Arithmetic rather
// than a select, which GCC would fold into the max and then not vectorise the reduction.
inline uint32_t amax_candidate(uint32_t bits) {
  const uint32_t abs_bits = bits & codec::kF32AbsMask;
  const uint32_t nan_mask =
      static_cast<uint32_t>(static_cast<int32_t>(codec::kF32InfBits - abs_bits) >> 31);
  return abs_bits & ~nan_mask;
}

// 1 when rounding carries a scaled value past the largest finite value (Inf too, NaN not).
template <class F>
inline uint32_t beyond_range(uint32_t bits) {
  const uint32_t abs_bits = bits & codec::kF32AbsMask;
  return (abs_bits >= F::kOverflowBits && abs_bits <= codec::kF32InfBits) ? 1u : 0u;
}

// Writes `len` codes of the chunk starting at element `first`: one byte each, or packed two per
// byte for E2M1 (element 2i in the low nibble). `codes` has room for one padding code.
template <class F>
inline void store_chunk(uint8_t* codes, int64_t len, int64_t first, uint8_t* out) {
  if constexpr (F::kBits == 8) {
    std::memcpy(out + first, codes, static_cast<size_t>(len));
  } else {
    codes[len] = 0;  // an odd tail leaves the last high nibble 0
    uint8_t* packed = out + first / 2;
    const int64_t bytes = (len + 1) / 2;
    for (int64_t j = 0; j < bytes; ++j) {
      packed[j] = static_cast<uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
    }
  }
}

// The shared batch loop: code_of(scaled_bits, element_index) gives each element's code; the amax
// is taken when kAmax.
template <class F, bool kAmax, class CodeOf>
void encode_chunks_with(const float* in, int64_t n, float multiplier, uint8_t* out,
                        EncodeStats* stats, CodeOf code_of) {
  uint32_t amax_bits = 0;
  int64_t saturated = 0;
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t len = std::min(kChunk, n - first);
    const float* chunk = in + first;
    uint8_t codes[kChunk + 1];
    uint32_t chunk_amax = 0;
    uint32_t chunk_saturated = 0;
    for (int64_t i = 0; i < len; ++i) {
      const uint32_t scaled = float_bits(chunk[i] * multiplier);
      if constexpr (kAmax) chunk_amax = std::max(chunk_amax, amax_candidate(float_bits(chunk[i])));
      chunk_saturated += beyond_range<F>(scaled);
      codes[i] = static_cast<uint8_t>(code_of(scaled, first + i));
    }
    amax_bits = std::max(amax_bits, chunk_amax);
    saturated += chunk_saturated;
    store_chunk<F>(codes, len, first, out);
  }
  if (stats != nullptr) {
    if constexpr (kAmax) stats->amax = std::max(stats->amax, codec::bits_float(amax_bits));
    stats->saturated += saturated;
  }
}

template <class F, class CodeOf>
void encode_chunks(const float* in, int64_t n, float multiplier, uint8_t* out, EncodeStats* stats,
                   CodeOf code_of) {
  if (stats != nullptr && stats->track_amax) {
    encode_chunks_with<F, true>(in, n, multiplier, out, stats, code_of);
  } else {
    encode_chunks_with<F, false>(in, n, multiplier, out, stats, code_of);
  }
}

template <class F>
void encode_rne_n(const float* in, int64_t n, float multiplier, uint8_t* out, bool saturate,
                  EncodeStats* stats) {
  // Two instantiations, so that the overflow rule is a constant inside the loop.
  if (saturate) {
    encode_chunks<F>(in, n, multiplier, out, stats,
                     [](uint32_t bits, int64_t) { return codec::encode_rne_batch<F>(bits, true); });
  } else {
    encode_chunks<F>(in, n, multiplier, out, stats, [](uint32_t bits, int64_t) {
      return codec::encode_rne_batch<F>(bits, false);
    });
  }
}

// Element i draws counter_random_from_key(key, first_index + i * index_stride); a stride of 1 is
// its own instantiation (kStrided false), so that the common loop keeps its plain index.
template <class F, bool kStrided>
void encode_stochastic_chunks(const float* in, int64_t n, float multiplier, uint64_t key,
                              uint64_t first_index, uint64_t index_stride, uint8_t* out,
                              bool saturate, EncodeStats* stats) {
  auto code_of = [key, first_index, index_stride](bool sat) {
    return [key, first_index, index_stride, sat](uint32_t bits, int64_t i) {
      const uint64_t step =
          kStrided ? static_cast<uint64_t>(i) * index_stride : static_cast<uint64_t>(i);
      const uint32_t random = codec::counter_random_from_key(key, first_index + step);
      return codec::encode_stochastic_batch<F>(bits, random, sat);
    };
  };
  if (saturate) {
    encode_chunks<F>(in, n, multiplier, out, stats, code_of(true));
  } else {
    encode_chunks<F>(in, n, multiplier, out, stats, code_of(false));
  }
}

// FP32 values with one multiplier: the loops above, over the values in place.
template <class F>
void encode_plain(const EncodeRun& run, const float* in, int64_t n, float multiplier,
                  uint64_t first_index, uint8_t* out, EncodeStats* stats) {
  if (!run.stochastic) {
    encode_rne_n<F>(in, n, multiplier, out, run.saturate, stats);
  } else if (run.index_stride == 1) {
    encode_stochastic_chunks<F, false>(in, n, multiplier, run.key, first_index, 1, out,
                                       run.saturate, stats);
  } else {
    encode_stochastic_chunks<F, true>(in, n, multiplier, run.key, first_index, run.index_stride,
                                      out, run.saturate, stats);
  }
}

// Any run: bf16 values or several multipliers through chunks of FP32 products (value times its
// multiplier, encoded with multiplier 1: the same codes, as x * m * 1 == x * m), the amax taken of
// the values on the way.
template <class F>
void encode_portable(const EncodeRun& run, EncodeStats* stats) {
  if (!run.bf16 && run.multipliers == nullptr) {
    encode_plain<F>(run, static_cast<const float*>(run.in), run.n, run.multiplier, run.first_index,
                    run.out, stats);
    return;
  }
  const auto* f32 = static_cast<const float*>(run.in);
  const auto* bf16 = static_cast<const uint16_t*>(run.in);
  EncodeStats counted{.track_amax = false};
  uint32_t amax_bits = 0;
  constexpr int64_t kScaledChunk = 256;  // even: E2M1 chunks start on whole bytes
  float scaled[kScaledChunk];
  for (int64_t first = 0; first < run.n; first += kScaledChunk) {
    const int64_t len = std::min(kScaledChunk, run.n - first);
    for (int64_t j = 0; j < len;) {  // a run of elements that share a multiplier
      const int64_t i = first + j;
      const float m = run.multipliers != nullptr ? run.multipliers[i / run.block] : run.multiplier;
      const int64_t end =
          run.multipliers != nullptr ? std::min(len, j + run.block - i % run.block) : len;
      for (; j < end; ++j) {
        const float v =
            run.bf16 ? codec::bits_float(uint32_t(bf16[first + j]) << 16) : f32[first + j];
        amax_bits = std::max(amax_bits, amax_candidate(float_bits(v)));
        scaled[j] = v * m;
      }
    }
    encode_plain<F>(run, scaled, len, 1.0f, run.first_index + uint64_t(first) * run.index_stride,
                    run.out + (F::kBits == 4 ? first / 2 : first), &counted);
  }
  if (stats == nullptr) return;
  if (run.track_amax) stats->amax = std::max(stats->amax, codec::bits_float(amax_bits));
  stats->saturated += counted.saturated;
}

void encode_portable_run(Format f, const EncodeRun& run, const char* what, EncodeStats* stats) {
  in_fastest_build([&] {
    with_element_format(f, what,
                        [&](auto format) { encode_portable<decltype(format)>(run, stats); });
  });
}

void add_totals(const EncodeRun& run, const EncodeTotals& totals, EncodeStats* stats) {
  if (stats == nullptr) return;
  if (run.track_amax) stats->amax = std::max(stats->amax, codec::bits_float(totals.amax_bits));
  stats->saturated += totals.saturated;
}

// A run on the widest vector path that `path`, the CPU and the run's blocks allow (AVX-512, then
// AVX2), else on the portable loops; totals added to `stats`.
void encode_run(Format f, const EncodeRun& run, const char* what, EncodeStats* stats,
                EncodePath path) {
  // (The vector paths read a first multiplier before their loops: not for an empty run.)
  if (f != Format::e8m0 && path == EncodePath::fastest && run.n > 0) {
    if (avx512_encoders_available() && avx512_takes(run))
      return add_totals(run, encode_avx512(f, run), stats);
    if (avx2_encoders_available() && avx2_takes(run))
      return add_totals(run, encode_avx2(f, run), stats);
  }
  encode_portable_run(f, run, what, stats);
}

bool tracks_amax(const EncodeStats* stats) {
  return stats != nullptr && stats->track_amax;
}

EncodeRun scaled_run(const ScaledValues& in, uint8_t* out, Overflow overflow,
                     const EncodeStats* stats) {
  H2_CHECK(in.multipliers == nullptr || in.block > 0, "encode_scaled_n: block {} must be positive",
           in.block);
  return {.in = in.values,
          .bf16 = in.bf16,
          .n = in.n,
          .multipliers = in.multipliers,
          .block = in.multipliers != nullptr ? in.block : EncodeRun{}.block,
          .out = out,
          .saturate = saturates(overflow),
          .track_amax = tracks_amax(stats)};
}

}  // namespace

void encode_n(Format f, const float* in, int64_t n, float multiplier, uint8_t* out,
              Overflow overflow, EncodeStats* stats, EncodePath path) {
  const EncodeRun run{.in = in,
                      .n = n,
                      .multiplier = multiplier,
                      .out = out,
                      .saturate = saturates(overflow),
                      .track_amax = tracks_amax(stats)};
  encode_run(f, run, "encode_n", stats, path);
}

void encode_stochastic_n(Format f, const float* in, int64_t n, float multiplier, uint64_t seed,
                         uint64_t first_index, uint8_t* out, Overflow overflow, EncodeStats* stats,
                         EncodePath path) {
  encode_stochastic_strided_n(f, in, n, multiplier, seed, first_index, 1, out, overflow, stats,
                              path);
}

void encode_stochastic_strided_n(Format f, const float* in, int64_t n, float multiplier,
                                 uint64_t seed, uint64_t first_index, uint64_t index_stride,
                                 uint8_t* out, Overflow overflow, EncodeStats* stats,
                                 EncodePath path) {
  const EncodeRun run{.in = in,
                      .n = n,
                      .multiplier = multiplier,
                      .out = out,
                      .saturate = saturates(overflow),
                      .stochastic = true,
                      .key = codec::random_key(seed),
                      .first_index = first_index,
                      .index_stride = index_stride,
                      .track_amax = tracks_amax(stats)};
  encode_run(f, run, "encode_stochastic_n", stats, path);
}

void encode_scaled_n(Format f, const ScaledValues& in, uint8_t* out, Overflow overflow,
                     EncodeStats* stats, EncodePath path) {
  encode_run(f, scaled_run(in, out, overflow, stats), "encode_scaled_n", stats, path);
}

void encode_scaled_stochastic_n(Format f, const ScaledValues& in, uint64_t seed,
                                uint64_t first_index, uint64_t index_stride, uint8_t* out,
                                Overflow overflow, EncodeStats* stats, EncodePath path) {
  EncodeRun run = scaled_run(in, out, overflow, stats);
  run.stochastic = true;
  run.key = codec::random_key(seed);
  run.first_index = first_index;
  run.index_stride = index_stride;
  encode_run(f, run, "encode_scaled_stochastic_n", stats, path);
}

}  // namespace h2::lowp
