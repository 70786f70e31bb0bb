// Code compiled twice, for the kernels' -march (H2_CPU_ARCH, x86-64-v3 by default) and for
// x86-64-v4 (AVX-512: 16 lanes), and run in the build the CPU can take: the v4 build where the CPU
// is x86-64-v4 and H2_CPU_MAX_ISA leaves AVX-512 visible (core/cpu_features.h), so that a build
// for AVX2 machines still uses AVX-512 where it exists and the AVX2 build can be tested on such a
// CPU. flatten inlines fn and everything it calls into each build, so that all of it is compiled
// for that build's instructions. (GCC's target_clones, used before, chose by the CPU alone, before
// main.) Clang (the fuzzing build) and other architectures compile only the default build.
// Users: the low-precision batch encoders and decoders (core/lowp), the CPU kernels' row loops
// that gain most from 512-bit vectors (backends/cpu/kernels/wide_rows.h: SwiGLU, attention's
// exponentials), and the kernels whose parallel ranges run in it whole (parallel_for_fastest in
// backends/cpu/kernels/cpu_parallel.h: RMSNorm, cross-entropy, AdamW, add).
#pragma once

namespace h2 {

// Whether in_fastest_build takes the x86-64-v4 build; answered once per process.
bool run_v4_build();

#if defined(__x86_64__) && !defined(__clang__)
template <class Fn>
[[gnu::target("arch=x86-64-v4"), gnu::flatten]] void v4_build(Fn fn) {
  fn();
}
#endif
template <class Fn>
[[gnu::flatten]] void default_build(Fn fn) {
  fn();
}

// Runs fn, a loop and everything it calls, in the build run_v4_build() picks. The builds take fn
// by value and a loop should capture by value: a lambda in memory the loop's stores through a
// uint8_t* may alias is reloaded every iteration (nvfp4_scales_n took 4.3% of an nvfp4 step
// that way, 0.8% without).
template <class Fn>
void in_fastest_build(Fn&& fn) {
#if defined(__x86_64__) && !defined(__clang__)
  if (run_v4_build()) return v4_build(fn);
#endif
  default_build(fn);
}

}  // namespace h2
