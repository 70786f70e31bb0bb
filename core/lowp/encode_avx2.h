// The batch encoders' AVX2 path (core/lowp/encode_batch.cpp takes it at run time, whatever the
// build's -march, where the CPU has AVX2 and the AVX-512 path does not take the run: no AVX-512,
// or blocks of 8 to 15 values): 8 elements per step in explicit intrinsics, bit for bit the
// codes, saturation counts and amaxes of the portable loops (format_codec.h's encode_rne_batch
// and encode_stochastic_batch, same formulation lane by lane), bf16 values widened and scaled by
// their blocks' multipliers in registers, and the counter-based random bits drawn 8 at a time.
// Internal to core/lowp; tests reach it to compare the lane formulation with the reference on
// chosen random bits.
#pragma once

#include <cstdint>

#include "core/lowp/encode_batch.h"
#include "core/lowp/formats.h"

namespace h2::lowp::detail {

// Whether this CPU runs the path (AVX2, as H2_CPU_MAX_ISA leaves it visible).
bool avx2_encoders_available();

// Whether the path takes the run: one multiplier (or one block), one per value, or blocks of at
// least 8 values (a step reaches into two at most).
bool avx2_takes(const EncodeRun& run);

// The run on the AVX2 path; f is E4M3, E5M2 or E2M1. Only where avx2_encoders_available().
EncodeTotals encode_avx2(Format f, const EncodeRun& run);

// For tests: codes[i] (one per byte, E2M1 unpacked) of the FP32 patterns bits[i], i < n, by the
// path's lane formulation: round to nearest even, or stochastic rounding with random[i] as the
// random bits when `random` is not null.
void encode_lanes_avx2(Format f, const uint32_t* bits, const uint32_t* random, int64_t n,
                       bool saturate, uint8_t* codes);

}  // namespace h2::lowp::detail
