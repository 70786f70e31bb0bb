// cpuid and xgetbv for cpu_features.h. Built for the compiler's baseline (no -march): the CPU
// backend's load-time check calls it before anything built for a newer CPU may run.
#include "core/cpu_features.h"
#include "core/fastest_build.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <iterator>

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
  unsigned b7 = 0, c7 = 0, d7 = 0, a7_1 = 0;
  if (max_leaf >= 7) {
    unsigned a7 = 0;
    __cpuid_count(7, 0, a7, b7, c7, d7);
    if (a7 >= 1) __cpuid_count(7, 1, a7_1, unused, unused, unused);
  }
  unsigned max_extended = 0, c_ext = 0;
  __get_cpuid(0x80000000u, &max_extended, &unused, &unused, &unused);
  if (max_extended >= 0x80000001u) __get_cpuid(0x80000001u, &unused, &unused, &c_ext, &unused);
  const bool avx512f = avx512_state && ((b7 >> 16) & 1u);
  // AMX-BF16 counts with AMX-TILE too, which a hypervisor may mask apart from it.
  const bool amx = amx_state && ((d7 >> 24) & 1u) != 0;
  const bool has[] = {
      avx && avx_state,                 // avx
      avx_state && ((b7 >> 5) & 1u),    // avx2
      fma && avx_state,                 // fma
      f16c && avx_state,                // f16c
      ((b7 >> 8) & 1u) != 0,            // bmi2
      avx512f,                          // avx512f
      avx512f && ((b7 >> 30) & 1u),     // avx512bw
      avx512f && ((b7 >> 17) & 1u),     // avx512dq
      avx512f && ((b7 >> 31) & 1u),     // avx512vl
      avx512f && ((a7_1 >> 5) & 1u),    // avx512_bf16
      amx && ((d7 >> 22) & 1u),         // amx_bf16
      ((b7 >> 3) & 1u) != 0,            // bmi1
      ((c_ext >> 5) & 1u) != 0,         // lzcnt (ABM)
      ((ecx >> 22) & 1u) != 0,          // movbe
      ((ecx >> 23) & 1u) != 0,          // popcnt
      avx512f && ((b7 >> 28) & 1u),     // avx512cd
      avx512f && ((c7 >> 1) & 1u),      // avx512vbmi
      avx512f && ((c7 >> 6) & 1u),      // avx512vbmi2
      avx512f && ((c7 >> 11) & 1u),     // avx512vnni
      avx512f && ((b7 >> 21) & 1u),     // avx512ifma
      avx512f && ((c7 >> 12) & 1u),     // avx512bitalg
      avx512f && ((c7 >> 14) & 1u),     // avx512vpopcntdq
      avx512f && ((d7 >> 8) & 1u),      // avx512vp2intersect
      avx512f && ((d7 >> 23) & 1u),     // avx512fp16
      ((c7 >> 8) & 1u) != 0,            // gfni
      avx_state && ((c7 >> 9) & 1u),    // vaes
      avx_state && ((c7 >> 10) & 1u),   // vpclmulqdq
      avx_state && ((a7_1 >> 4) & 1u),  // avxvnni
  };
  static_assert(sizeof has == unsigned(CpuFeature::avxvnni) + 1);
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

constexpr uint32_t bit(CpuFeature f) {
  return 1u << unsigned(f);
}

// Each CpuIsaLevel, in the enum's order: its H2_CPU_MAX_ISA spelling and the features it leaves
// visible, each level those of the one before and more.
struct LevelInfo {
  const char* name;
  uint32_t visible;
};
constexpr uint32_t kAvx2 = bit(CpuFeature::avx) | bit(CpuFeature::avx2) | bit(CpuFeature::fma) |
                           bit(CpuFeature::f16c) | bit(CpuFeature::bmi2) | bit(CpuFeature::bmi1) |
                           bit(CpuFeature::lzcnt) | bit(CpuFeature::movbe) |
                           bit(CpuFeature::popcnt);
constexpr uint32_t kAvx512 = kAvx2 | bit(CpuFeature::avx512f) | bit(CpuFeature::avx512bw) |
                             bit(CpuFeature::avx512dq) | bit(CpuFeature::avx512vl) |
                             bit(CpuFeature::avx512cd);
constexpr uint32_t kAvx512Bf16 = kAvx512 | bit(CpuFeature::avx512_bf16);
constexpr LevelInfo kLevels[] = {{"avx2", kAvx2},
                                 {"avx512", kAvx512},
                                 {"avx512_bf16", kAvx512Bf16},
                                 {"amx", kAvx512Bf16 | bit(CpuFeature::amx_bf16)},
                                 {"native", ~0u}};
static_assert(std::size(kLevels) == size_t(CpuIsaLevel::native) + 1);

}  // namespace

const char* cpu_isa_level_name(CpuIsaLevel level) {
  return kLevels[size_t(level)].name;
}

bool parse_cpu_isa_level(const char* text, CpuIsaLevel* level) {
  if (text == nullptr || *text == '\0') {
    *level = CpuIsaLevel::native;
    return true;
  }
  for (size_t i = 0; i < std::size(kLevels); ++i)
    if (std::strcmp(text, kLevels[i].name) == 0) {
      *level = CpuIsaLevel(i);
      return true;
    }
  return false;
}

CpuIsaLevel cpu_isa_cap() {
  static const CpuIsaLevel cap = [] {
    CpuIsaLevel level = CpuIsaLevel::native;
    if (!parse_cpu_isa_level(std::getenv("H2_CPU_MAX_ISA"), &level)) level = CpuIsaLevel::native;
    return level;
  }();
  return cap;
}

bool cpu_has(CpuFeature f) {
  // A fact of the machine and the process's environment, computed once.
  static const uint32_t mask = probe() & kLevels[size_t(cpu_isa_cap())].visible;
  return (mask >> unsigned(f)) & 1u;
}

bool run_v4_build() {
#if defined(__x86_64__) && !defined(__clang__)
  static const bool v4 = __builtin_cpu_supports("x86-64-v4") && cpu_has_avx512bw();
  return v4;
#else
  return false;
#endif
}

}  // namespace h2
