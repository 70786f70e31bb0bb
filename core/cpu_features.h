// The running CPU's x86 instruction-set features, for code that picks a kernel at run time
// whatever the build's -march: cpuid's feature bits, and for AVX and AVX-512 the operating
// system's consent to save their registers (xgetbv), as the compilers' __builtin_cpu_supports
// checks them. One probe for the whole project: the CPU backend's load-time check
// (backends/cpu/kernel_isa.h), the low-precision encoders and decoders (core/lowp) and the
// K-block GEMM all ask here. (Clang 14's __builtin_cpu_supports does not know "f16c".)
//
// H2_CPU_MAX_ISA caps what the probe reports, so that every run-time choice (H2's kernels, and
// oneDNN's through backends/cpu/kernels/gemm_onednn.cpp) takes the path of an older CPU: the
// conformance tests run the AVX2 paths on an AVX-512 machine, and a benchmark measures what an
// AVX2-only CPU would run. A cap only hides features; it never adds one the CPU lacks.
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
  amx_bf16,  // with AMX-TILE, and the tile registers' state granted by the OS too; Linux also
             // wants a request (arch_prctl) before the first tile instruction, which oneDNN and
             // the K-block kernel (backends/cpu/kernels/kblock_gemm.cpp) make
  // What else a compiler's -march may let it emit anywhere (x86-64-v3 has the first four; a
  // -march=native build on a newer CPU the rest): for the CPU backend's load-time check, which
  // compares them with the kernels' build. No kernel dispatches on them; the H2_CPU_MAX_ISA
  // levels show the first four from avx2 on and avx512cd from avx512 on, the rest only natively.
  bmi1,
  lzcnt,
  movbe,
  popcnt,
  avx512cd,
  avx512vbmi,
  avx512vbmi2,
  avx512vnni,
  avx512ifma,
  avx512bitalg,
  avx512vpopcntdq,
  avx512vp2intersect,
  avx512fp16,
  gfni,
  vaes,
  vpclmulqdq,
  avxvnni,
};

// The newest instruction sets run-time dispatch may use, oldest first. Each level adds features
// to the one before: avx2 (AVX, AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE, POPCNT), avx512
// (AVX512F/BW/CD/ DQ/VL), avx512_bf16, amx (AMX's bf16 tiles); native adds nothing and hides
// nothing.
enum class CpuIsaLevel : uint8_t { avx2, avx512, avx512_bf16, amx, native };

// H2_CPU_MAX_ISA's spelling of `level`, and its inverse: false for anything but those names
// (an empty or null text is native). C strings only: the load-time check calls these.
const char* cpu_isa_level_name(CpuIsaLevel level);
bool parse_cpu_isa_level(const char* text, CpuIsaLevel* level);

// H2_CPU_MAX_ISA, read once, on first use; native when unset or unparsable. Every CPU-executing
// device rejects an unparsable value with a ConfigError when it starts (OneDnnGemm's
// constructor), which this cannot do: it runs inside load-time constructors.
CpuIsaLevel cpu_isa_cap();

// Whether the running CPU has `f` and H2_CPU_MAX_ISA leaves it visible (false on other
// architectures). Probed once, on first use; safe from any thread and from load-time
// constructors (cpuid, xgetbv and getenv only).
bool cpu_has(CpuFeature f);

// AVX512F and AVX512BW, the pair that 512-bit byte and word kernels need, answered once per
// process: for call sites that ask on every call of a short kernel (a strip, a transpose).
inline bool cpu_has_avx512bw() {
  static const bool has = cpu_has(CpuFeature::avx512f) && cpu_has(CpuFeature::avx512bw);
  return has;
}

// AVX2, answered once per process, for the same kind of call sites (the AVX2 encoders and
// decoders, asked per row).
inline bool cpu_has_avx2() {
  static const bool has = cpu_has(CpuFeature::avx2);
  return has;
}

}  // namespace h2
