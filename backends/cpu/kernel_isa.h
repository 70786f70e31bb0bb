// The instruction sets H2's own CPU kernels were compiled for (H2_CPU_ARCH, x86-64-v3 unless the
// build chose otherwise) against those of the CPU running them. A binary built for a newer CPU
// than the one it runs on stops at load naming the missing features and the way out, instead of
// dying of SIGILL in the first kernel. The GEMM libraries (oneDNN, OpenBLAS) choose their
// kernels by the running CPU themselves and need nothing here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace h2::cpu {

// x86 features as bits; kIsaNames[i] names bit i, as /proc/cpuinfo spells it ("abm": LZCNT).
// Every feature GCC 12's -march may enable for code it generates on its own, not only those the
// kernels dispatch on: a -march=native build from a newer CPU uses AVX512_VBMI's byte permutes in
// the FP8 encoders, which a CPU with every AVX-512 feature up to BF16 lacks. (Newer compilers know
// more: AVX-VNNI-INT8, AVX-NE-CONVERT, AVX-IFMA, AVX10; a mask of 32 bits has room for five.)
inline constexpr const char* kIsaNames[] = {"avx",
                                            "avx2",
                                            "fma",
                                            "f16c",
                                            "bmi2",
                                            "avx512f",
                                            "avx512bw",
                                            "avx512dq",
                                            "avx512vl",
                                            "avx512_bf16",
                                            "bmi1",
                                            "abm",
                                            "movbe",
                                            "popcnt",
                                            "avx512cd",
                                            "avx512vbmi",
                                            "avx512_vbmi2",
                                            "avx512_vnni",
                                            "avx512ifma",
                                            "avx512_bitalg",
                                            "avx512_vpopcntdq",
                                            "avx512_vp2intersect",
                                            "avx512_fp16",
                                            "gfni",
                                            "vaes",
                                            "vpclmulqdq",
                                            "avx_vnni"};
inline constexpr int kIsaCount = int(std::size(kIsaNames));

// The features the kernels' compiler flags enabled, from the compiler's predefined macros in a
// file built with those flags (a constant: no vector instruction runs to compute it).
uint32_t kernel_isa_mask();
// The -march value the kernels were built with ("x86-64-v3", "native"; "" for the compiler's
// default).
const char* kernel_arch();
// The features of the running CPU (cpuid), from code built for the plain x86-64 baseline.
uint32_t cpu_isa_mask();

// Whether the running CPU has AMX with bf16 tiles (cpuid leaf 7: where oneDNN's tile kernels
// outrun every AVX-512 GEMM).
bool cpu_has_amx_bf16();

// "avx2, fma": the names of `mask`'s bits.
std::string isa_names(uint32_t mask);
// The message for a CPU that lacks the features of `missing` (a mask), naming the build's -march
// and how to rebuild: into `out` (C stdio only, for the load-time check), or as a string.
void isa_mismatch_text(uint32_t missing, const char* arch, char* out, size_t size);
std::string isa_mismatch_message(uint32_t missing, const std::string& arch);

}  // namespace h2::cpu
