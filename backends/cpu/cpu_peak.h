// The CPU's f32 GEMM peak for MFU figures, measured on this machine once and cached: a figure
// from another CPU (a fixed GFLOP/s per thread) made MFU read 33% where it was about 70%.
//
// Measured as the best of 4 timed 2048^3 f32 GEMMs (after one warm-up) through the device's GEMM
// library on its kernel threads, about 0.5 s on 2 cores; cached in a JSON file, one entry per
// (CPU model and generation, ISA flags, threads, GEMM library and the kernels it chose, which
// ONEDNN_MAX_CPU_ISA or OPENBLAS_CORETYPE change too), so a job pays it once per machine. Delete
// the file (or an entry) to measure again; H2_CPU_PEAK_GFLOPS overrides both. Ranks starting
// together take turns (a lock file beside the cache): the first measures, the others read its
// figure. A machine busy with other work while it measures reads low (a figure cached so made once
// showed MFU 114%): when other processes used more than a share of a core during the measurement
// (/proc/stat against this process's CPU time), the figure serves this run and is not cached.
#pragma once

#include <filesystem>
#include <istream>
#include <string>

#include "backends/cpu/kernel_context.h"

namespace h2::cpu {

struct CpuPeak {
  double gflops = 0;
  std::string source;  // how it was obtained, for logs and metrics
};

// What identifies a CPU's peak: model name, family, model number and stepping, and the ISA flags
// GEMM kernels dispatch on. The numbers matter where the name does not say the generation: VMs
// show "AMD EPYC" for Zen 4 and Zen 5 alike, with the same flags, and a peak more than twice as
// high on the second (one cache in a home folder shared by both would serve the other's figure).
struct CpuIdentity {
  std::string model;  // e.g. "AMD EPYC (family 26, model 2, stepping 0)"
  std::string flags;  // e.g. "avx2 fma avx512f avx512_bf16 amx_bf16"
  static CpuIdentity of_this_machine();
  // From /proc/cpuinfo's text (its first processor).
  static CpuIdentity from_cpuinfo(std::istream& cpuinfo);
};

// $XDG_CACHE_HOME/h2/cpu_peak.json, else $HOME/.cache/h2/cpu_peak.json; empty when neither is set.
std::filesystem::path default_peak_cache();

// The cached figure for this CPU, threads, library and operand type (f32, or bf16 where oneDNN
// runs it natively), or a fresh measurement written to the cache (atomically: temporary file and
// rename; an unwritable cache only loses the caching). An empty `cache` path caches nothing.
// `max_foreign_share`: the CPU time other processes may use during the measurement, as a share
// of its wall time (0.25: a quarter of one core), beyond which the figure is not cached.
CpuPeak cpu_gemm_peak(KernelContext& context, int threads, bool bf16,
                      const std::filesystem::path& cache, double max_foreign_share = 0.25);

// One measurement, not cached (GFLOP/s).
double measure_gemm_gflops(KernelContext& context, int threads, bool bf16);

// One measurement with what else ran meanwhile.
struct PeakMeasurement {
  double gflops = 0;
  double seconds = 0;              // wall time of the measurement
  double foreign_cpu_seconds = 0;  // CPU time of other processes meanwhile (0 if unknown)
};
PeakMeasurement measure_gemm_peak(KernelContext& context, int threads, bool bf16);

}  // namespace h2::cpu
