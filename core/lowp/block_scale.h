// The scale of one block from its amax, per ScaleRule (the definitions are in quant_spec.h),
// shared by the CPU and CUDA quantize kernels so that both produce the same bytes. Header-only and
// __host__ __device__ under nvcc. FP32 arithmetic throughout, in the order quant_spec.h writes it.
// Edge cases the rules leave open: an amax of 0 gives the rule's unit or smallest scale (f32_amax
// m = s = 1, E8M0 2^-127, nvfp4 s_enc = 1); an infinite amax gives f32_amax m = s = 1, the largest
// E8M0 scale (2^127) and nvfp4 s_enc = 1; multipliers that would overflow FP32 are clamped to the
// largest finite float. Callers compute amax ignoring NaNs.
#pragma once

#include <cfloat>
#include <cstdint>

#include "core/lowp/format_codec.h"

namespace h2::lowp {

struct BlockScale {
  float multiplier = 1;  // elements encode x * multiplier
  float scale = 1;       // dequantized element = decode(code) * scale (FP32)
  uint8_t code = 0;      // the stored byte: E8M0 (e8m0_*) or E4M3 (nvfp4); unused for f32_amax
};

H2_HOST_DEVICE inline bool finite_positive(float x) {
  return x > 0 && x <= FLT_MAX;
}

H2_HOST_DEVICE inline float clamp_finite(float x) {
  return x <= FLT_MAX ? x : FLT_MAX;
}

// f32_amax: m = max_finite / amax, s = 1 / m.
H2_HOST_DEVICE inline BlockScale f32_amax_scale(float amax, float max_finite) {
  const float m = finite_positive(amax) ? clamp_finite(max_finite / amax) : 1.0f;
  return {m, 1.0f / m, 0};
}

// A multiplier the caller imposes (delayed scaling): s = 1 / m.
H2_HOST_DEVICE inline BlockScale imposed_scale(float multiplier) {
  return {multiplier, 1.0f / multiplier, 0};
}

// floor(log2 x) and the 23 fraction bits of x's significand, for finite x > 0 (FP32 subnormals
// are first scaled by 2^64, exactly). Bit arithmetic, so it inlines on host and device alike.
struct Binade {
  int exponent;
  uint32_t fraction;
};
H2_HOST_DEVICE inline Binade binade_of(float x) {
  uint32_t bits = codec::float_bits(x);
  int bias = 127;
  if ((bits >> 23) == 0) {
    bits = codec::float_bits(x * 18446744073709551616.0f);  // 2^64
    bias += 64;
  }
  return {int(bits >> 23) - bias, bits & 0x7fffffu};
}

// 2^e for e in [-127, 127] (2^-127 is an FP32 subnormal).
H2_HOST_DEVICE inline float pow2(int e) {
  return codec::bits_float(e >= -126 ? uint32_t(e + 127) << 23 : 0x00400000u);
}

// e8m0_floor: e = floor(log2 amax) - emax_elem; e8m0_ceil: the smallest e with
// amax <= max_finite * 2^e. emax_elem = floor(log2 max_finite) (8, 15, 2). e in [-127, 127].
H2_HOST_DEVICE inline BlockScale e8m0_scale(float amax, bool round_up, float max_finite) {
  int e;
  if (!(amax > 0)) {
    e = -127;
  } else if (!(amax <= FLT_MAX)) {
    e = 127;
  } else {
    const Binade a = binade_of(amax), m = binade_of(max_finite);
    e = a.exponent - m.exponent;
    // amax = 1.fa * 2^ea, max_finite = 1.fm * 2^emax: one step more when fa > fm.
    if (round_up && a.fraction > m.fraction) ++e;
    e = e < -127 ? -127 : (e > 127 ? 127 : e);
  }
  return {pow2(-e), pow2(e), uint8_t(e + 127)};
}

// nvfp4 tensor level: s_enc = 6 * 448 / amax_tensor; the stored global is g = 1 / s_enc.
H2_HOST_DEVICE inline float nvfp4_encode_scale(float amax_tensor) {
  return finite_positive(amax_tensor) ? clamp_finite(2688.0f / amax_tensor) : 1.0f;
}

// nvfp4 block: sb = e4m3(amax_block / 6 * s_enc) (saturating), elements encode
// x * (s_enc / decode(sb)) (0 when sb decodes to 0), s = decode(sb) * g. Branch-free (the
// batch form of round to nearest even), so that a loop over blocks vectorises.
H2_HOST_DEVICE inline BlockScale nvfp4_scale(float amax_block, float s_enc, float global) {
  const uint8_t sb = uint8_t(codec::encode_rne_batch<codec::E4M3>(
      codec::float_bits(amax_block / 6.0f * s_enc), /*saturate=*/true));
  const float d = codec::decode<codec::E4M3>(sb);
  return {d > 0 ? s_enc / d : 0.0f, d * global, sb};
}

}  // namespace h2::lowp
