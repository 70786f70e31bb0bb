// kernel_isa_mask() and kernel_arch(): compiled with the kernels' -march
// (backends/cpu/CMakeLists.txt), so the predefined macros below are theirs. Constants only.
#include "backends/cpu/kernel_isa.h"

namespace h2::cpu {

uint32_t kernel_isa_mask() {
  uint32_t mask = 0;
#if defined(__AVX__)
  mask |= 1u << 0;
#endif
#if defined(__AVX2__)
  mask |= 1u << 1;
#endif
#if defined(__FMA__)
  mask |= 1u << 2;
#endif
#if defined(__F16C__)
  mask |= 1u << 3;
#endif
#if defined(__BMI2__)
  mask |= 1u << 4;
#endif
#if defined(__AVX512F__)
  mask |= 1u << 5;
#endif
#if defined(__AVX512BW__)
  mask |= 1u << 6;
#endif
#if defined(__AVX512DQ__)
  mask |= 1u << 7;
#endif
#if defined(__AVX512VL__)
  mask |= 1u << 8;
#endif
#if defined(__AVX512BF16__)
  mask |= 1u << 9;
#endif
#if defined(__BMI__)
  mask |= 1u << 10;
#endif
#if defined(__LZCNT__)
  mask |= 1u << 11;
#endif
#if defined(__MOVBE__)
  mask |= 1u << 12;
#endif
#if defined(__POPCNT__)
  mask |= 1u << 13;
#endif
#if defined(__AVX512CD__)
  mask |= 1u << 14;
#endif
#if defined(__AVX512VBMI__)
  mask |= 1u << 15;
#endif
#if defined(__AVX512VBMI2__)
  mask |= 1u << 16;
#endif
#if defined(__AVX512VNNI__)
  mask |= 1u << 17;
#endif
#if defined(__AVX512IFMA__)
  mask |= 1u << 18;
#endif
#if defined(__AVX512BITALG__)
  mask |= 1u << 19;
#endif
#if defined(__AVX512VPOPCNTDQ__)
  mask |= 1u << 20;
#endif
#if defined(__AVX512VP2INTERSECT__)
  mask |= 1u << 21;
#endif
#if defined(__AVX512FP16__)
  mask |= 1u << 22;
#endif
#if defined(__GFNI__)
  mask |= 1u << 23;
#endif
#if defined(__VAES__)
  mask |= 1u << 24;
#endif
#if defined(__VPCLMULQDQ__)
  mask |= 1u << 25;
#endif
#if defined(__AVXVNNI__)
  mask |= 1u << 26;
#endif
  return mask;
}

const char* kernel_arch() {
  return H2_CPU_ARCH_NAME;
}

}  // namespace h2::cpu
