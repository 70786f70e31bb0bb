// The batch encoders' AVX-512 path (core/lowp/encode_batch.cpp takes it at run time where the CPU
// has AVX512F, BW, DQ and VL, whatever the build's -march): 16 elements per step in explicit
// intrinsics, bit for bit the codes, saturation counts and amaxes of the portable loops
// (format_codec.h's encode_rne_batch and encode_stochastic_batch, same formulation lane by lane),
// bf16 values widened and scaled by their blocks' multipliers in registers, the counter-based
// random bits drawn 16 at a time and E2M1's nibbles paired in registers.
// Internal to core/lowp; tests reach it to compare the lane formulation with the reference on
// chosen random bits.
#pragma once

#include <cstdint>

#include "core/lowp/encode_batch.h"
#include "core/lowp/formats.h"

namespace h2::lowp::detail {

// Whether this CPU runs the path (AVX512F, BW, DQ and VL).
bool avx512_encoders_available();

// Whether the path takes the run: one multiplier (or one block), one per value, or blocks of at
// least 16 values (a step reaches into two at most).
bool avx512_takes(const EncodeRun& run);

// The run on the AVX-512 path; f is E4M3, E5M2 or E2M1. Only where avx512_encoders_available().
EncodeTotals encode_avx512(Format f, const EncodeRun& run);

// For tests: codes[i] (one per byte, E2M1 unpacked) of the FP32 patterns bits[i], i < n, by the
// path's lane formulation: round to nearest even, or stochastic rounding with random[i] as the
// random bits when `random` is not null.
void encode_lanes_avx512(Format f, const uint32_t* bits, const uint32_t* random, int64_t n,
                         bool saturate, uint8_t* codes);

}  // namespace h2::lowp::detail
