// cpuid and xgetbv for cpu_features.h. Built for the compiler's baseline (no -march): the CPU
// backend's load-time check calls it before anything built for a newer CPU may run.
#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace h2 {
namespace {

#if defined(__x86_64__)
// The features as bits of a mask (bit i: CpuFeature i).
uint32_t probe() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const bool fma = (ecx >> 12) & 1u, osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u,
             f16c = (ecx >> 29) & 1u;
  // The vector state the OS saves (XCR0): SSE and AVX (bits 1-2), AVX-512's opmask and upper
  // registers (5-7), AMX's tile configuration and data (17-18).
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t low = 0, high = 0;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    xcr0 = (uint64_t(high) << 32) | low;
  }
  const bool avx_state = (xcr0 & 0x6) == 0x6, avx512_state = (xcr0 & 0xe6) == 0xe6;
  const bool amx_state = ((xcr0 >> 17) & 3u) == 3u;
  unsigned max_leaf = 0, unused = 0;
  __get_cpuid(0, &max_leaf, &unused, &unused, &unused);
  unsigned b7 = 0, d7 = 0, a7_1 = 0;
  if (max_leaf >= 7) {
    unsigned a7 = 0, c7 = 0;
    __cpuid_count(7, 0, a7, b7, c7, d7);
    if (a7 >= 1) __cpuid_count(7, 1, a7_1, unused, unused, unused);
  }
  const bool avx512f = avx512_state && ((b7 >> 16) & 1u);
  const bool has[] = {
      avx && avx_state,                // avx
      avx_state && ((b7 >> 5) & 1u),   // avx2
      fma && avx_state,                // fma
      f16c && avx_state,               // f16c
      ((b7 >> 8) & 1u) != 0,           // bmi2
      avx512f,                         // avx512f
      avx512f && ((b7 >> 30) & 1u),    // avx512bw
      avx512f && ((b7 >> 17) & 1u),    // avx512dq
      avx512f && ((b7 >> 31) & 1u),    // avx512vl
      avx512f && ((a7_1 >> 5) & 1u),   // avx512_bf16
      amx_state && ((d7 >> 22) & 1u),  // amx_bf16
  };
  static_assert(sizeof has == unsigned(CpuFeature::amx_bf16) + 1);
  uint32_t mask = 0;
  for (unsigned i = 0; i < sizeof has; ++i)
    if (has[i]) mask |= 1u << i;
  return mask;
}
#else
uint32_t probe() {
  return 0;
}
#endif

}  // namespace

bool cpu_has(CpuFeature f) {
  static const uint32_t mask = probe();  // a fact of the machine, computed once
  return (mask >> unsigned(f)) & 1u;
}

}  // namespace h2
