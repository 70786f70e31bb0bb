// The running CPU's x86 instruction-set features, for code that picks a kernel at run time
// whatever the build's -march: cpuid's feature bits, and for AVX and AVX-512 the operating
// system's consent to save their registers (xgetbv), as the compilers' __builtin_cpu_supports
// checks them. One probe for the whole project: the CPU backend's load-time check
// (backends/cpu/kernel_isa.h), the low-precision encoders and decoders (core/lowp) and the
// K-block GEMM all ask here. (Clang 14's __builtin_cpu_supports does not know "f16c".)
#pragma once

#include <cstdint>

namespace h2 {

enum class CpuFeature : uint8_t {
  avx,
  avx2,
  fma,
  f16c,
  bmi2,
  avx512f,
  avx512bw,
  avx512dq,
  avx512vl,
  avx512_bf16,
  amx_bf16,  // the tile registers' state granted by the OS too; Linux also wants a request
             // (arch_prctl) before the first tile instruction, which oneDNN makes
};

// Whether the running CPU has `f` (false on other architectures). Probed once, on first use;
// safe from any thread and from load-time constructors (cpuid and xgetbv only).
bool cpu_has(CpuFeature f);

// AVX512F and AVX512BW, the pair that 512-bit byte and word kernels need, answered once per
// process: for call sites that ask on every call of a short kernel (a strip, a transpose).
inline bool cpu_has_avx512bw() {
  static const bool has = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw);
  return has;
}

}  // namespace h2
