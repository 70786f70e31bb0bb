// NaN-ignoring maxima of |x| over bf16 data for the quantizer's block amaxes, as quantize_rows.h's
// magnitude bits or their values: down the columns of a band of rows (a transposed input's
// blocks run down the columns of `in`) and along the 16-value segments of a row (nvfp4's
// blocks). Where the CPU has AVX512BW (asked at run time, whatever the build's -march) they run
// in registers; elsewhere the portable loops of quantize_rows.h.
#pragma once

#include <cstdint>

#include "core/half_float.h"

namespace h2::cpu {

// most[i] = max over k < rows of magnitude_bits(x[k * ld + i]), for i < w.
void bf16_column_magnitudes(const bf16_t* x, int64_t ld, int64_t rows, int64_t w, uint16_t* most);

// amax[c] = the largest |x| of row[16 c, 16 c + 16), NaN ignored, for c < segments.
void bf16_segment16_amaxes(const bf16_t* row, int64_t segments, float* amax);

}  // namespace h2::cpu
