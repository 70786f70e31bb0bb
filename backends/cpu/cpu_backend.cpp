// CPU device properties, events and copies (see cpu_backend.h).
#include "backends/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/cpu/cpu_peak.h"
#include "backends/cpu/kernel_isa.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kblock_gemm.h"
#include "core/cpu_features.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::cpu {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// OpenBLAS picks its kernels when it loads (OPENBLAS_CORETYPE, else the CPU), before H2 can cap
// them: under H2_CPU_MAX_ISA the GEMMs it runs (inside low-precision tiles, and all of them with
// H2_CPU_GEMM=openblas) would still use the newer CPU's instructions. Says so.
void warn_if_openblas_exceeds_the_cap() {
  const CpuIsaLevel cap = cpu_isa_cap();
  if (cap == CpuIsaLevel::native || cap == CpuIsaLevel::amx) return;
  // Lower case: a DYNAMIC_ARCH OpenBLAS says "SkylakeX", one built for a single core "SKYLAKEX".
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const bool avx512_core = core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
  const bool bf16_core = core == "cooperlake" || core == "sapphirerapids";
  if ((cap == CpuIsaLevel::avx2 && avx512_core) || (cap == CpuIsaLevel::avx512 && bf16_core))
    H2_LOG_WARN(
        "H2_CPU_MAX_ISA={} does not reach OpenBLAS, which loaded its {} kernels: set "
        "OPENBLAS_CORETYPE={} too",
        cpu_isa_level_name(cap), openblas_get_corename(),
        cap == CpuIsaLevel::avx2 ? "Haswell" : "SkylakeX");
}

}  // namespace

CpuOptions CpuOptions::from_env() {
  CpuOptions options;
  options.threads = int(env_int("H2_NUM_THREADS", 0, 4096));
  options.peak_gflops = env_double("H2_CPU_PEAK_GFLOPS", 0, 1e9);
  std::string allocator = env_string("H2_CPU_ALLOCATOR");
  if (allocator != "caching" && allocator != "system")
    H2_THROW(ConfigError, "H2_CPU_ALLOCATOR='{}' is not 'caching' or 'system'", allocator);
  options.caching_allocator = allocator == "caching";
  options.gemm = parse_gemm_provider(env_string("H2_CPU_GEMM"), "H2_CPU_GEMM");
  options.kblock_kernel = kblock_kernel_from_env();
  return options;
}

int cpu_threads() {
  return omp_get_max_threads();
}

void HostEvent::record(Stream&) {
  seconds_ = now_seconds();
}

double HostEvent::elapsed_ms_since(const Event& start) const {
  return (seconds_ - dynamic_cast<const HostEvent&>(start).seconds_) * 1e3;
}

CpuDevice::CpuDevice(const CpuOptions& options)
    : allocator_("cpu:0", 0, options.caching_allocator),
      context_(options.gemm, options.kblock_kernel),
      stream_(*this, context_) {
  peak_gflops_setting_ = options.peak_gflops;
  // isa_guard.cpp stopped the process at load already; this keeps that file linked into every
  // binary with a CPU device, and says the same to a caller that catches errors.
  const uint32_t missing_isa = kernel_isa_mask() & ~cpu_isa_mask();
  H2_CHECK(missing_isa == 0, "{}", isa_mismatch_message(missing_isa, kernel_arch()));
  warn_if_openblas_exceeds_the_cap();
  if (options.threads > 0) {
    kernel_thread_setting().store(options.threads);
    openblas_set_num_threads(options.threads);  // for GEMMs called outside our parallel regions
  }
  int threads = cpu_threads();
  props_.name = fmt::format("{} ({} threads)", cpu_model_name(), threads);
  props_.memory_bytes = int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGESIZE));
  // Nominal figures from the first development machine (docs/performance.md): OpenBLAS SGEMM
  // about 165 GFLOP/s per core, about 40 GB/s memory bandwidth. The peaks' keys say which dtypes
  // the GEMMs take; MFU and `h2 devices` divide by mfu_peak's figure, measured on this machine.
  double peak = options.peak_gflops > 0 ? options.peak_gflops : 165.0 * threads;
  props_.peak_flops = {
      {DType::f32, peak * 1e9}, {DType::bf16, peak * 1e9}, {DType::f16, peak * 1e9}};
  props_.memory_bandwidth = 40e9;
  // f8e4m3, f8e5m2, f4e2m1: the codes of quantize and qmatmul (emulated: decoded to FP32).
  props_.dtypes = {DType::f32,    DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2,
                   DType::f4e2m1, DType::i32,  DType::i64, DType::u8};
}

std::string gemm_provider_name(GemmProvider provider) {
  return provider == GemmProvider::onednn ? "onednn" : "openblas";
}

std::string gemm_kernels_name(GemmProvider provider) {
  return gemm_provider_name(provider) + " " +
         (provider == GemmProvider::onednn ? OneDnnGemm::kernel_isa()
                                           : std::string(openblas_get_corename()));
}

GemmProvider parse_gemm_provider(const std::string& name, const std::string& where) {
  if (name == "onednn") return GemmProvider::onednn;
  if (name == "openblas") return GemmProvider::openblas;
  H2_THROW(ConfigError, "{}='{}' is not a GEMM library: use onednn or openblas", where, name);
}

KBlockKernel kblock_kernel_from_env() {
  const std::string choice = env_string("H2_CPU_KBLOCK_GEMM");
  if (choice != "auto" && choice != "h2" && choice != "onednn")
    H2_THROW(ConfigError, "H2_CPU_KBLOCK_GEMM='{}' is not auto, h2 or onednn", choice);
  if (choice == "onednn") return KBlockKernel::library;
  if (kblock_gemm_runs_here()) return KBlockKernel::h2_avx512_bf16;
  if (kblock_gemm_avx512_runs_here()) return KBlockKernel::h2_avx512;
  if (kblock_gemm_avx2_runs_here()) return KBlockKernel::h2_avx2;
  if (choice == "auto") return KBlockKernel::library;
  H2_THROW(ConfigError,
           "H2_CPU_KBLOCK_GEMM=h2 needs AVX2 and FMA at least, which this CPU lacks or "
           "H2_CPU_MAX_ISA hides: use auto or onednn");
}

KernelContext& kernel_context(Stream& stream) {
  auto* context = static_cast<KernelContext*>(stream.native_handle());
  H2_CHECK(context != nullptr, "a CPU kernel ran on {}'s stream, which has no CPU kernel context",
           stream.device().id().str());
  return *context;
}

Device::Peak CpuDevice::mfu_peak(DType dtype) {
  if (peak_gflops_setting_ > 0)
    return {peak_gflops_setting_ * 1e9,
            fmt::format("H2_CPU_PEAK_GFLOPS={:g}", peak_gflops_setting_)};
  const bool bf16 = dtype == DType::bf16 && context_.gemm_provider() == GemmProvider::onednn &&
                    context_.onednn().native_bf16();
  std::lock_guard lock(peak_mutex_);
  auto it = measured_peaks_.find(bf16);
  if (it == measured_peaks_.end()) {
    const CpuPeak peak = cpu_gemm_peak(context_, kernel_threads(), bf16, default_peak_cache());
    it = measured_peaks_.emplace(bf16, Peak{peak.gflops * 1e9, peak.source}).first;
  }
  return it->second;
}

void CpuDevice::copy_bytes(void* dst, bool, const void* src, bool, size_t bytes, Stream&) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

Device& CpuBackend::device(int index) {
  H2_CHECK(index == 0, "cpu has one device; asked for cpu:{}", index);
  return device_;
}

}  // namespace h2::cpu
