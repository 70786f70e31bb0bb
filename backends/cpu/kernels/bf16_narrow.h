// f32 -> bf16 rounding (nearest, ties to even; NaN stays NaN, quiet) in vectors, for
// cpu_floats.h's from_floats, which every bf16 kernel's store and every widened GEMM's output
// pass through. Per value on a Zen 5 core, in L1: AVX-512 0.034 ns, AVX2 0.072 ns, the loop the
// compiler makes of f32_to_bf16 for AVX2 0.12 ns (0.07 for AVX-512 in L2). Widening is a shift
// that memory bounds at any width, so it has no such twin.
#pragma once

#include <cstdint>

#include "core/half_float.h"

namespace h2::cpu {

// Each rounds the first values of src into dst, bit-identical to f32_to_bf16 per value, and
// returns how many it did; the caller does the rest.
// n / 16 * 16 of them, on a CPU with AVX512F and AVX512BW.
int64_t from_floats_avx512(const float* src, int64_t n, bf16_t* dst);
// n / 8 * 8 of them, on a CPU with AVX2.
int64_t from_floats_avx2(const float* src, int64_t n, bf16_t* dst);

}  // namespace h2::cpu
