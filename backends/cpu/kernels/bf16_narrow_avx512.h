// f32 -> bf16 rounding (nearest, ties to even; NaN stays NaN, quiet) with AVX-512F/BW, for
// cpu_floats.h's from_floats where the CPU has them (cpu_has_avx512bw): 1.7-3.5x the AVX2 loop
// the compiler makes of f32_to_bf16 (0.07 in L2 and 0.034 in L1 against 0.12 ns per value on a
// Zen 5 core), which every bf16 kernel's store and every widened GEMM's output pass through.
// Widening is a shift that memory bounds at either width, so it has no such twin.
#pragma once

#include <cstdint>

#include "core/half_float.h"

namespace h2::cpu {

// Rounds the first n / 16 * 16 values of src into dst, bit-identical to f32_to_bf16 per value,
// and returns how many it did; the caller does the rest. Only on a CPU with AVX512F and AVX512BW.
int64_t from_floats_avx512(const float* src, int64_t n, bf16_t* dst);

}  // namespace h2::cpu
