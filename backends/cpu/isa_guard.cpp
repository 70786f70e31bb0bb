// The load-time check of kernel_isa.h, and the helpers that name features. Compiled for the
// plain x86-64 baseline (never the kernels' -march). The check runs as a constructor ahead of
// the default-priority static initializers, and uses no C++ library template (whose one linked
// copy may come from a file built with the kernels' flags): only core/cpu_features.h (cpuid and
// xgetbv, built for the baseline too) and C stdio.
#include <cstdio>
#include <cstdlib>

#include "backends/cpu/kernel_isa.h"
#include "core/cpu_features.h"

namespace h2::cpu {

uint32_t cpu_isa_mask() {
  // kIsaNames' features, in its order.
  constexpr CpuFeature kFeatures[] = {CpuFeature::avx,
                                      CpuFeature::avx2,
                                      CpuFeature::fma,
                                      CpuFeature::f16c,
                                      CpuFeature::bmi2,
                                      CpuFeature::avx512f,
                                      CpuFeature::avx512bw,
                                      CpuFeature::avx512dq,
                                      CpuFeature::avx512vl,
                                      CpuFeature::avx512_bf16,
                                      CpuFeature::bmi1,
                                      CpuFeature::lzcnt,
                                      CpuFeature::movbe,
                                      CpuFeature::popcnt,
                                      CpuFeature::avx512cd,
                                      CpuFeature::avx512vbmi,
                                      CpuFeature::avx512vbmi2,
                                      CpuFeature::avx512vnni,
                                      CpuFeature::avx512ifma,
                                      CpuFeature::avx512bitalg,
                                      CpuFeature::avx512vpopcntdq,
                                      CpuFeature::avx512vp2intersect,
                                      CpuFeature::avx512fp16,
                                      CpuFeature::gfni,
                                      CpuFeature::vaes,
                                      CpuFeature::vpclmulqdq,
                                      CpuFeature::avxvnni};
  static_assert(std::size(kFeatures) == kIsaCount);
  uint32_t mask = 0;
  for (int i = 0; i < kIsaCount; ++i)
    if (cpu_has(kFeatures[i])) mask |= 1u << i;
  return mask;
}

bool cpu_has_amx_bf16() {
  return cpu_has(CpuFeature::amx_bf16);
}

std::string isa_names(uint32_t mask) {
  std::string names;
  for (int i = 0; i < kIsaCount; ++i)
    if (mask & (1u << i)) names += (names.empty() ? "" : ", ") + std::string(kIsaNames[i]);
  return names;
}

void isa_mismatch_text(uint32_t missing, const char* arch, char* out, size_t size) {
  int n = std::snprintf(out, size, "H2's CPU kernels were built for -march=%s but this CPU lacks",
                        *arch ? arch : "(compiler default)");
  const char* separator = " ";
  for (int i = 0; i < kIsaCount && n >= 0 && size_t(n) < size; ++i)
    if (missing & (1u << i)) {
      n += std::snprintf(out + n, size - size_t(n), "%s%s", separator, kIsaNames[i]);
      separator = ", ";
    }
  if (cpu_isa_cap() != CpuIsaLevel::native && n >= 0 && size_t(n) < size)
    n += std::snprintf(out + n, size - size_t(n), " (as H2_CPU_MAX_ISA=%s shows it)",
                       cpu_isa_level_name(cpu_isa_cap()));
  if (n >= 0 && size_t(n) < size)
    std::snprintf(out + n, size - size_t(n),
                  ": rebuild with -DH2_CPU_ARCH=native for this machine, or -DH2_CPU_ARCH=x86-64 "
                  "for every x86-64 CPU (scripts/build.sh passes its arguments to CMake)");
}

std::string isa_mismatch_message(uint32_t missing, const std::string& arch) {
  char text[512];
  isa_mismatch_text(missing, arch.c_str(), text, sizeof text);
  return text;
}

namespace {

// Exit 70 (EX_SOFTWARE) with the missing features named, where the alternative is an illegal
// instruction somewhere later.
[[gnu::constructor(101)]] void check_kernel_isa_at_load() {
  const uint32_t missing = kernel_isa_mask() & ~cpu_isa_mask();
  if (missing == 0) return;
  char text[512];
  isa_mismatch_text(missing, kernel_arch(), text, sizeof text);
  std::fprintf(stderr, "error: %s\n", text);
  std::_Exit(70);
}

}  // namespace
}  // namespace h2::cpu
