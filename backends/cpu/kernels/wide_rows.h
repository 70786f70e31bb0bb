// Element loops over f32 rows that run faster 512 bits wide: the SwiGLU gate and its gradient,
// and the exponentials of attention's softmax. The CPU kernels are built for x86-64-v3 (AVX2) so
// that one binary runs on every machine of a mixed cluster; these loops also run in an x86-64-v4
// build where the CPU has it and H2_CPU_MAX_ISA allows it (core/fastest_build.h). Built for
// x86-64-v4 throughout, tiny's step ran 3.5% (f32) and 5% (bf16) shorter on a Zen 5 EPYC, two
// thirds of it in SwiGLU (docs/performance.md, stop 49). Both builds compute the same expressions
// element by element and, over the default x86-64-v3 baseline, both contract them into FMAs
// alike, so they agree bit for bit except where a sum's lanes differ.
#pragma once

#include <cstdint>

namespace h2::cpu {

// out[i] = silu(gate[i]) * up[i].
void swiglu_fwd_row(const float* gate, const float* up, float* out, int64_t n);
// dgate[i] = dout[i] up[i] silu'(gate[i]), dup[i] = dout[i] silu(gate[i]); all inputs are read
// before either output is written, so the outputs may alias the inputs.
void swiglu_bwd_row(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n);
// p[j] = exp(p[j] - shift) in place; returns the sum of the new p[j], in 16 lanes.
float exp_shifted_sum(float* p, int64_t n, float shift);
// p[j] = exp(p[j] - shift) in place.
void exp_shifted(float* p, int64_t n, float shift);

}  // namespace h2::cpu
