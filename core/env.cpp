// The one table of H2_* environment knobs (see env.h).
#include "core/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace h2 {
namespace {

constexpr EnvKnob kKnobs[] = {
    {"H2_LOG_LEVEL", "info", "log level: trace, debug, info, warn, error, off"},
    {"H2_NUM_THREADS", "0", "CPU kernel threads; 0 uses every core OpenMP sees"},
    {"H2_FALLBACK_OPS", "",
     "comma-separated ops (or 'all') to run on the CPU backend with explicit copies, with a "
     "warning"},
    {"H2_CHECK_OPS", "",
     "comma-separated ops (or 'all') to shadow-run on the CPU backend and compare (autocompare); "
     "copy, which the comparison reads devices with, is never compared"},
    {"H2_CHECK_RTOL", "0", "autocompare relative tolerance; 0 uses the dtype's default"},
    {"H2_CPU_ALLOCATOR", "caching",
     "CPU allocator: caching (reuses blocks) or system (malloc/free)"},
    {"H2_CPU_GEMM", "onednn",
     "library of the CPU matmul op's GEMMs: onednn or openblas (docs/performance.md)"},
    {"H2_CPU_KBLOCK_GEMM", "auto",
     "who runs fp8_blockwise's GEMMs on the CPU: h2 (its AVX512_BF16 kernel promoting each K "
     "block's sums in registers), onednn (one GEMM per K block, rescaled after), or auto (h2 where "
     "the CPU has AVX512_BF16 and no AMX)"},
    {"H2_CPU_MAX_ISA", "native",
     "newest instruction set the CPU kernels and oneDNN may dispatch to: avx2, avx512, "
     "avx512_bf16, amx or native (whatever the CPU has); a lower level runs an older CPU's paths "
     "here. OpenBLAS, which chooses when it loads, follows OPENBLAS_CORETYPE instead (Haswell "
     "for avx2, SkylakeX for avx512)"},
    {"H2_CPU_PEAK_GFLOPS", "0",
     "CPU peak GFLOP/s that MFU figures (of every dtype) and h2 devices use; 0 measures it once "
     "per CPU, threads and GEMM library (2048^3 GEMMs in the job's dtype), cached in "
     "h2/cpu_peak.json under $XDG_CACHE_HOME or ~/.cache"},
    {"H2_VCHIP_CONFIG", "",
     "YAML file of virtual chip types to register; empty registers the built-in chips"},
    {"H2_CLUSTER_FILE", "",
     "cluster file (configs/clusters/*.yaml) whose chip each rank drives, in rank order; set by "
     "h2run --cluster, read by h2 train when cluster.file is empty"},
    {"H2_VCHIP_TIME_SCALE", "1",
     "multiplies every virtual chip's modelled kernel time (0 disables pacing)"},
    {"H2_COMM_TIMEOUT", "300",
     "seconds any blocking communication call (store, collective, send/recv) waits before it "
     "fails naming the peer"},
    {"H2_COMM_RING_THRESHOLD", "262144",
     "bytes from which all-reduce uses the bandwidth-optimal ring instead of recursive doubling"},
    {"H2_COMM_SEGMENT", "1048576", "bytes per pipelined segment of ring collectives"},
    {"H2_COMM_INTERFACE", "",
     "network devices the data plane listens on, in UCX_NET_DEVICES syntax (eth0,mlx5_0:1); "
     "empty: loopback for a job on one machine, else the interface that reaches the store and "
     "the active RDMA ports (UCX_NET_DEVICES, when set, wins)"},
    {"H2_COMM_SHM", "1",
     "1: groups whose ranks share one host run small all-reduces (up to 4 KiB) and barriers "
     "through shared memory; 0: through the transport like larger ones"},
    {"H2_PROGRESS_THREAD_US", "0",
     "pipeline runs: > 0 starts a helper thread per rank that drives the communicators every "
     "this many microseconds while a unit computes; 0: progress between units only (measured "
     "faster on 2 cores, docs/performance.md)"},
    {"H2_RANK", "", "this process's rank (set by h2run)"},
    {"H2_WORLD_SIZE", "", "number of ranks in the job (set by h2run)"},
    {"H2_LOCAL_RANK", "", "rank among the processes of this node (set by h2run)"},
    {"H2_LOCAL_WORLD_SIZE", "", "processes on this node (set by h2run)"},
    {"H2_NODE_RANK", "", "index of this node (set by h2run)"},
    {"H2_STORE_ADDR", "",
     "HOST:PORT of the rendezvous store (default 127.0.0.1 and a port "
     "derived from the job id)"},
    {"H2_JOB_TOKEN", "",
     "per-job secret every store client presents (set by h2run; derived "
     "from the launcher's job id otherwise)",
     true},
    {"H2_RESTART", "0",
     "how many times h2run restarted this job; from 1 on, h2 train resumes from the newest "
     "checkpoint in checkpoint.dir that this job wrote (the newest of any run with "
     "checkpoint.resume: true)"},
};

const EnvKnob& find_knob(std::string_view name) {
  for (const EnvKnob& knob : kKnobs)
    if (knob.name == name) return knob;
  H2_THROW(Error, "environment knob {} is not declared in core/env.cpp", name);
}

}  // namespace

std::span<const EnvKnob> env_knobs() {
  return kKnobs;
}

std::string env_string(std::string_view name) {
  const EnvKnob& knob = find_knob(name);
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::string(knob.default_value);
  return value;
}

double env_double(std::string_view name, double min, double max) {
  std::string value = env_string(name);
  char* end = nullptr;
  errno = 0;
  double parsed = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(parsed))
    H2_THROW(ConfigError, "{}='{}' is not a finite number", name, value);
  if (parsed < min || parsed > max)
    H2_THROW(ConfigError, "{}={} is outside [{}, {}]", name, value, min, max);
  return parsed;
}

long env_int(std::string_view name, long min, long max) {
  std::string value = env_string(name);
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || errno == ERANGE)
    H2_THROW(ConfigError, "{}='{}' is not an integer", name, value);
  if (parsed < min || parsed > max)
    H2_THROW(ConfigError, "{}={} is outside [{}, {}]", name, value, min, max);
  return parsed;
}

std::vector<std::string> env_list(std::string_view name) {
  std::vector<std::string> items;
  std::string value = env_string(name);
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    if (comma > start) items.push_back(value.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

}  // namespace h2
