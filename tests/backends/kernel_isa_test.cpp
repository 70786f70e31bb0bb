// The kernels' instruction-set check (backends/cpu/kernel_isa.h): what the build's flags enabled,
// what this CPU has (against /proc/cpuinfo, an independent reader of cpuid), and the message a
// CPU without them gets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "backends/cpu/kernel_context.h"
#include "backends/cpu/kernel_isa.h"
#include "backends/cpu/kernels/kblock_gemm.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/lowp/encode_avx2.h"
#include "core/lowp/encode_avx512.h"

namespace h2::cpu {
namespace {

// The flags that H2_CPU_MAX_ISA=level hides, as /proc/cpuinfo spells them (written out here, not
// taken from core/cpu_features.cpp, so that the two are checked against each other).
std::set<std::string> hidden_by(const std::string& level) {
  const std::set<std::string> avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"};
  // Shown only natively: no level names them.
  const std::set<std::string> newer = {"avx512vbmi",
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
  std::set<std::string> hidden;
  if (!level.empty() && level != "native") hidden.insert(newer.begin(), newer.end());
  if (level == "avx2" || level == "avx512" || level == "avx512_bf16") hidden.insert("amx_bf16");
  if (level == "avx2" || level == "avx512") hidden.insert("avx512_bf16");
  if (level == "avx2") hidden.insert(avx512.begin(), avx512.end());
  return hidden;
}

// This test process's H2_CPU_MAX_ISA ("" when unset).
std::string max_isa_setting() {
  const char* value = std::getenv("H2_CPU_MAX_ISA");
  return value ? value : "";
}

// The first "flags" line of /proc/cpuinfo as a set, less what this process's H2_CPU_MAX_ISA
// hides.
std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    for (const std::string& hidden : hidden_by(max_isa_setting())) flags.erase(hidden);
    return flags;
  }
  return {};
}

TEST(KernelIsa, TheRunningCpuMatchesProcCpuinfo) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const uint32_t mask = cpu_isa_mask();
  for (int i = 0; i < kIsaCount; ++i)
    EXPECT_EQ((mask >> i) & 1, flags.count(kIsaNames[i]))
        << kIsaNames[i] << ": cpuid and /proc/cpuinfo disagree";
}

// AMX is read from cpuid leaf 7 directly; /proc/cpuinfo calls it amx_bf16.
TEST(KernelIsa, AmxMatchesProcCpuinfo) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(cpu_has_amx_bf16(), flags.count("amx_bf16") == 1);
}

// H2_CPU_KBLOCK_GEMM: auto and h2 follow the CPU (H2's AVX512_BF16 kernel where it runs, on AMX's
// tiles too; else its FP32 AVX-512 kernel where the CPU has AVX512F and AVX512BW; else its FP32
// AVX2 one where it has AVX2 and FMA), where none runs auto is the libraries' and h2 refused,
// onednn is always the libraries', and anything else names the knob. Which kernels run is read
// against /proc/cpuinfo (less what H2_CPU_MAX_ISA hides: the capped runs check the older CPUs'
// choices).
TEST(KernelIsa, KBlockGemmKnob) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const bool avx512 = flags.count("avx512f") && flags.count("avx512bw");
  const bool avx512_bf16 =
      avx512 && flags.count("avx512dq") && flags.count("avx512vl") && flags.count("avx512_bf16");
  const bool avx2 = flags.count("avx2") && flags.count("fma");
  EXPECT_EQ(kblock_gemm_runs_here(), avx512_bf16);
  EXPECT_EQ(kblock_gemm_avx512_runs_here(), avx512);
  EXPECT_EQ(kblock_gemm_avx2_runs_here(), avx2);
  auto choice = [](const char* value) {
    setenv("H2_CPU_KBLOCK_GEMM", value, 1);
    return kblock_kernel_from_env();
  };
  const KBlockKernel h2 = avx512_bf16 ? KBlockKernel::h2_avx512_bf16
                          : avx512    ? KBlockKernel::h2_avx512
                                      : KBlockKernel::h2_avx2;
  const bool any = avx512_bf16 || avx512 || avx2;
  EXPECT_EQ(choice("auto"), any ? h2 : KBlockKernel::library);
  EXPECT_EQ(choice("onednn"), KBlockKernel::library);
  if (any) {
    EXPECT_EQ(choice("h2"), h2);
  } else {
    EXPECT_THROW(choice("h2"), ConfigError);
  }
  try {
    choice("fast");
    ADD_FAILURE() << "no error for H2_CPU_KBLOCK_GEMM=fast";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_CPU_KBLOCK_GEMM='fast'"), std::string::npos)
        << e.what();
  }
  unsetenv("H2_CPU_KBLOCK_GEMM");
}

TEST(KernelIsa, TheDefaultBuildNeedsExactlyX86_64_v3) {
  if (std::string(kernel_arch()) != "x86-64-v3")
    GTEST_SKIP() << "built with -march=" << kernel_arch() << ", not the default";
  // x86-64-v3 of the x86-64 psABI: AVX, AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE and POPCNT among
  // the features named here, no AVX-512.
  EXPECT_EQ(isa_names(kernel_isa_mask()), "avx, avx2, fma, f16c, bmi2, bmi1, abm, movbe, popcnt");
}

TEST(KernelIsa, TheKernelsNeedNothingThisCpuLacks) {
  // Otherwise the process would have stopped at load (isa_guard.cpp).
  EXPECT_EQ(kernel_isa_mask() & ~cpu_isa_mask(), 0u) << isa_names(kernel_isa_mask());
}

TEST(KernelIsa, AMismatchNamesTheMissingFeaturesAndTheWayOut) {
  const uint32_t missing = (1u << 1) | (1u << 5);  // avx2, avx512f
  const std::string message = isa_mismatch_message(missing, "x86-64-v4");
  EXPECT_NE(message.find("-march=x86-64-v4"), std::string::npos) << message;
  EXPECT_NE(message.find("lacks avx2, avx512f"), std::string::npos) << message;
  // Under a cap the message says that the features are hidden, not absent.
  const std::string cap = max_isa_setting();
  const bool capped = !cap.empty() && cap != "native";
  EXPECT_EQ(message.find("(as H2_CPU_MAX_ISA=" + cap + " shows it):") != std::string::npos, capped)
      << message;
  EXPECT_NE(message.find("-DH2_CPU_ARCH=native"), std::string::npos) << message;
  EXPECT_NE(isa_mismatch_message(missing, "").find("(compiler default)"), std::string::npos);
}

// H2_CPU_MAX_ISA's levels by name: each spelling parses to its level and back, unset or empty is
// native, anything else is refused by the parser and, naming the value, by a device's start.
TEST(CpuIsaCap, LevelsParseByNameAndADeviceRefusesAnUnknownOne) {
  for (CpuIsaLevel level : {CpuIsaLevel::avx2, CpuIsaLevel::avx512, CpuIsaLevel::avx512_bf16,
                            CpuIsaLevel::amx, CpuIsaLevel::native}) {
    CpuIsaLevel parsed = CpuIsaLevel::native;
    EXPECT_TRUE(parse_cpu_isa_level(cpu_isa_level_name(level), &parsed));
    EXPECT_EQ(parsed, level) << cpu_isa_level_name(level);
  }
  CpuIsaLevel parsed = CpuIsaLevel::avx2;
  EXPECT_TRUE(parse_cpu_isa_level(nullptr, &parsed));
  EXPECT_EQ(parsed, CpuIsaLevel::native);
  parsed = CpuIsaLevel::avx2;
  EXPECT_TRUE(parse_cpu_isa_level("", &parsed));
  EXPECT_EQ(parsed, CpuIsaLevel::native);
  EXPECT_FALSE(parse_cpu_isa_level("AVX2", &parsed));
  EXPECT_FALSE(parse_cpu_isa_level("avx512f", &parsed));

  const std::string saved = max_isa_setting();
  setenv("H2_CPU_MAX_ISA", "sse2", 1);
  try {
    KernelContext context(GemmProvider::onednn);
    ADD_FAILURE() << "no error for H2_CPU_MAX_ISA=sse2";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("H2_CPU_MAX_ISA='sse2'"), std::string::npos) << e.what();
  }
  if (saved.empty()) {
    unsetenv("H2_CPU_MAX_ISA");
  } else {
    setenv("H2_CPU_MAX_ISA", saved.c_str(), 1);
  }
}

// The cap holds what this process dispatches to: the features it reports (the KernelIsa tests
// above compare them with /proc/cpuinfo less what the cap hides), the CPU's AVX-512 and AVX2
// encoders, the K-block kernel, and oneDNN's bf16 GEMMs, which H2 uses only with bf16
// instructions (with AVX-512 and none, oneDNN 2.6 emulates them at a third of its f32 rate).
TEST(CpuIsaCap, OneDnnAndTheKernelsSeeOnlyTheVisibleFeatures) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const bool avx512 = flags.count("avx512f") && flags.count("avx512bw") &&
                      flags.count("avx512dq") && flags.count("avx512vl");
  EXPECT_EQ(lowp::detail::avx512_encoders_available(), avx512);
  EXPECT_EQ(lowp::detail::avx2_encoders_available(), flags.count("avx2") == 1);
  KernelContext context(GemmProvider::onednn);
  EXPECT_EQ(context.onednn().native_bf16(), flags.count("avx512_bf16") || flags.count("amx_bf16"));
}

}  // namespace
}  // namespace h2::cpu
