// The CPU's measured GEMM peak (backends/cpu/cpu_peak.h): a measurement that computed the right
// product, a cache that is read back (a planted figure comes back verbatim), keyed by CPU (name
// and generation), threads, library, the library's kernels and operand type (other entries
// kept), rewritten when corrupt, entries of other types taken for other keys, not written when
// another process kept a core busy during the measurement; and the device's MFU peak from
// H2_CPU_PEAK_GFLOPS when set.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_peak.h"
#include "core/cpu_features.h"

namespace h2::cpu {
namespace {

namespace fs = std::filesystem;

fs::path fresh_cache(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("h2_cpu_peak_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir / "h2" / "cpu_peak.json";
}

// Tests that are not about the load check accept any load: ctest runs other tests beside them.
constexpr double kAnyLoad = 1e9;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Two CPUs that /proc/cpuinfo names alike ("AMD EPYC" in a VM, the same GEMM flags) but whose
// generations differ are different keys; "model name" is not taken for "model"; only the first
// processor is read; flags are the GEMM-relevant ones in kGemmFlags' order.
TEST(CpuPeak, IdentityNamesTheGenerationWhereTheModelNameDoesNot) {
  auto identity = [](const std::string& text) {
    std::istringstream in(text);
    return CpuIdentity::from_cpuinfo(in);
  };
  auto cpuinfo = [](int family, int model) {
    return fmt::format(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {}\nmodel\t\t: {}\n"
        "model name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu avx512_bf16 sse avx2 fma "
        "avx512f\n\nprocessor\t: 1\ncpu family\t: 99\nmodel\t\t: 99\nmodel name\t: Other\n"
        "flags\t\t: avx2 amx_tile\n",
        family, model);
  };
  const CpuIdentity zen4 = identity(cpuinfo(25, 17)), zen5 = identity(cpuinfo(26, 2));
  EXPECT_EQ(zen4.model, "AMD EPYC (family 25, model 17, stepping 1)");
  EXPECT_EQ(zen5.model, "AMD EPYC (family 26, model 2, stepping 1)");
  EXPECT_EQ(zen4.flags, "avx2 fma avx512f avx512_bf16");
  EXPECT_EQ(zen5.flags, zen4.flags);
  // No numbers (not x86): the name alone; nothing at all: said so.
  EXPECT_EQ(identity("model name\t: Some CPU\nflags\t: avx2\n").model, "Some CPU");
  EXPECT_EQ(identity("").model, "unknown CPU");
  EXPECT_EQ(identity("").flags, "");
  // This machine's identity carries its numbers (every x86 /proc/cpuinfo has them).
  EXPECT_NE(CpuIdentity::of_this_machine().model.find("family"), std::string::npos)
      << CpuIdentity::of_this_machine().model;
}

TEST(CpuPeak, MeasuredOnceThenReadFromTheCache) {
  KernelContext context(GemmProvider::onednn);
  const fs::path cache = fresh_cache("once");
  const CpuPeak first = cpu_gemm_peak(context, 1, false, cache, kAnyLoad);
  EXPECT_GT(first.gflops, 0.1);  // any CPU that runs the tests multiplies faster than this
  EXPECT_NE(first.source.find("just now"), std::string::npos) << first.source;

  nlohmann::json j = read_json(cache);
  ASSERT_EQ(j["entries"].size(), 1u);
  const nlohmann::json& entry = j["entries"][0];
  EXPECT_EQ(entry["cpu"], CpuIdentity::of_this_machine().model);
  EXPECT_EQ(entry["threads"], 1);
  EXPECT_EQ(entry["gemm"], "onednn");
  EXPECT_EQ(entry["dtype"], "f32");
  EXPECT_DOUBLE_EQ(entry["gflops"].get<double>(), first.gflops);

  // A planted figure is what comes back: the second call reads instead of measuring.
  j["entries"][0]["gflops"] = 12345.5;
  std::ofstream(cache) << j.dump();
  const CpuPeak second = cpu_gemm_peak(context, 1, false, cache, kAnyLoad);
  EXPECT_DOUBLE_EQ(second.gflops, 12345.5);
  EXPECT_NE(second.source.find("cached in " + cache.string()), std::string::npos) << second.source;
  fs::remove_all(cache.parent_path().parent_path());
}

TEST(CpuPeak, AMeasurementBesideABusyProcessIsUsedButNotCached) {
  const pid_t busy = fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {  // a second process that keeps one core busy until it is killed
    [[maybe_unused]] volatile uint64_t sink = 0;
    for (uint64_t i = 0;; ++i) sink = i;
  }
  KernelContext context(GemmProvider::onednn);
  const fs::path cache = fresh_cache("loaded");
  // At most 5% of a core for others: the spinning child alone uses far more.
  const CpuPeak peak = cpu_gemm_peak(context, 1, false, cache, 0.05);
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  EXPECT_GT(peak.gflops, 0.1);
  EXPECT_NE(peak.source.find("under load"), std::string::npos) << peak.source;
  EXPECT_NE(peak.source.find("not cached"), std::string::npos) << peak.source;
  EXPECT_FALSE(fs::exists(cache)) << "a figure measured under load was cached";
  fs::remove_all(cache.parent_path().parent_path());
}

// The key: CPU, flags, threads, library, dtype and H2_CPU_MAX_ISA (an entry without one, as
// caches before the cap had, is the uncapped CPU's).
TEST(CpuPeak, EntriesAreKeyedByThreadsAndLibraryAndOthersAreKept) {
  const fs::path cache = fresh_cache("keys");
  fs::create_directories(cache.parent_path());
  const CpuIdentity cpu = CpuIdentity::of_this_machine();
  const std::string kernels = gemm_kernels_name(GemmProvider::openblas);  // "openblas Haswell"
  nlohmann::json planted = {{"entries",
                             {{{"cpu", "another CPU"},
                               {"flags", cpu.flags},
                               {"threads", 1},
                               {"gemm", "openblas"},
                               {"kernels", kernels},
                               {"dtype", "f32"},
                               {"gflops", 777.0}},
                              // OpenBLAS's other kernels (OPENBLAS_CORETYPE), listed first.
                              {{"cpu", cpu.model},
                               {"flags", cpu.flags},
                               {"threads", 7},
                               {"gemm", "openblas"},
                               {"kernels", kernels + "X"},
                               {"dtype", "f32"},
                               {"gflops", 666.0}},
                              {{"cpu", cpu.model},
                               {"flags", cpu.flags},
                               {"threads", 7},
                               {"gemm", "openblas"},
                               {"kernels", kernels},
                               {"dtype", "f32"},
                               {"gflops", 888.0}},
                              {{"cpu", cpu.model},
                               {"flags", cpu.flags},
                               {"threads", 7},
                               {"gemm", "openblas"},
                               {"kernels", kernels},
                               {"dtype", "f32"},
                               {"max_isa", "avx2"},
                               {"gflops", 999.0}}}}};
  std::ofstream(cache) << planted.dump();
  KernelContext blas(GemmProvider::openblas);
  const CpuPeak measured = cpu_gemm_peak(blas, 1, false, cache, kAnyLoad);  // no entry is this key
  for (double planted_gflops : {777.0, 666.0, 888.0, 999.0})
    EXPECT_NE(measured.gflops, planted_gflops);
  EXPECT_EQ(read_json(cache)["entries"].size(), 5u);
  EXPECT_EQ(read_json(cache)["entries"][4]["kernels"], kernels);
  const double seven = cpu_gemm_peak(blas, 7, false, cache, kAnyLoad).gflops;
  const std::string cap = cpu_isa_level_name(cpu_isa_cap());
  if (cap == "native") {
    EXPECT_DOUBLE_EQ(seven, 888.0);
  } else if (cap == "avx2") {
    EXPECT_DOUBLE_EQ(seven, 999.0);
  } else {
    EXPECT_NE(seven, 888.0);
    EXPECT_NE(seven, 999.0);
  }
  fs::remove_all(cache.parent_path().parent_path());
}

TEST(CpuPeak, ACorruptCacheIsMeasuredAgainAndRewritten) {
  const fs::path cache = fresh_cache("corrupt");
  fs::create_directories(cache.parent_path());
  std::ofstream(cache) << "{\"entries\": [ not json";
  KernelContext context(GemmProvider::onednn);
  const CpuPeak peak = cpu_gemm_peak(context, 1, false, cache, kAnyLoad);
  EXPECT_GT(peak.gflops, 0.1);
  EXPECT_EQ(read_json(cache)["entries"].size(), 1u);
  fs::remove_all(cache.parent_path().parent_path());
}

// Entries edited by hand into other types are other keys, not errors: the run measures, keeps
// them, and an entry of its own key with an odd date is served with "?" for it.
TEST(CpuPeak, EntriesOfOtherTypesAreNotErrors) {
  const fs::path cache = fresh_cache("types");
  fs::create_directories(cache.parent_path());
  const CpuIdentity cpu = CpuIdentity::of_this_machine();
  KernelContext blas(GemmProvider::openblas);
  nlohmann::json planted = {{"entries",
                             {{{"cpu", 5}, {"gflops", 1}},
                              {{"cpu", cpu.model},
                               {"flags", cpu.flags},
                               {"threads", "3"},
                               {"gemm", "openblas"},
                               {"kernels", gemm_kernels_name(GemmProvider::openblas)},
                               {"dtype", "f32"},
                               {"gflops", 333.0}}}}};
  std::ofstream(cache) << planted.dump();
  const CpuPeak measured = cpu_gemm_peak(blas, 3, false, cache, kAnyLoad);
  EXPECT_NE(measured.gflops, 333.0);
  EXPECT_EQ(read_json(cache)["entries"].size(), 3u);

  nlohmann::json j = read_json(cache);
  j["entries"][2]["measured_at"] = 12;
  j["entries"][2]["gflops"] = 444.0;
  std::ofstream(cache) << j.dump();
  const CpuPeak cached = cpu_gemm_peak(blas, 3, false, cache, kAnyLoad);
  EXPECT_EQ(cached.gflops, 444.0);
  EXPECT_NE(cached.source.find("openblas"), std::string::npos) << cached.source;
  EXPECT_NE(cached.source.find(", ?; cached in"), std::string::npos) << cached.source;
  fs::remove_all(cache.parent_path().parent_path());
}

TEST(CpuPeak, TheSettingWinsOverTheMeasurement) {
  CpuDevice device(CpuOptions{.peak_gflops = 50});
  const Device::Peak peak = device.mfu_peak(DType::f32);
  EXPECT_DOUBLE_EQ(peak.flops, 50e9);
  EXPECT_EQ(peak.source, "H2_CPU_PEAK_GFLOPS=50");
}

}  // namespace
}  // namespace h2::cpu
