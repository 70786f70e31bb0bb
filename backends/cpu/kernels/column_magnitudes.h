// The column maxima of |x| over a band of rows of a bf16 matrix, as quantize_rows.h's magnitude
// bits (NaN as 0): the amaxes of the quantizer's transposed inputs, whose blocks run down the
// columns of `in`. Where the CPU has AVX512BW (asked at run time, whatever the build's -march),
// the maxima of 256 columns stay in eight registers while the band's rows stream past; elsewhere
// the portable loop, which GCC keeps in memory, 16 columns per AVX2 step.
#pragma once

#include <cstdint>

#include "core/half_float.h"

namespace h2::cpu {

// most[i] = max over k < rows of magnitude_bits(x[k * ld + i]), for i < w.
void bf16_column_magnitudes(const bf16_t* x, int64_t ld, int64_t rows, int64_t w, uint16_t* most);

}  // namespace h2::cpu
