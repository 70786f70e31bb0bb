// The FP32 batch decoder's AVX2 path (core/lowp/formats.cpp's decode_blocks_n takes it at run time
// where the CPU has AVX2, whatever the build's -march): 8 codes per step to their FP32 values
// times their block's multiplier, the same values as codec::decode times the multiplier.
// Internal to core/lowp.
#pragma once

#include <cstdint>

#include "core/lowp/formats.h"

namespace h2::lowp::detail {

// out[i] = decode(f, code of element i) * multipliers[i / block] for the whole steps of 8
// elements; returns how many it did (the caller does the rest). f is E4M3, E5M2 or E2M1 (codes
// unpacked from `in`, element 0 in the low nibble); block a multiple of 8, or at least n (one
// multiplier). Only where cpu_has_avx2() (core/cpu_features.h).
int64_t decode_blocks_avx2(Format f, const uint8_t* in, int64_t n, int64_t block,
                           const float* multipliers, float* out);

}  // namespace h2::lowp::detail
