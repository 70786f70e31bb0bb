// The CPU's measured f32 GEMM peak and its cache file (see cpu_peak.h).
#include "backends/cpu/cpu_peak.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/gemm_blas.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::cpu {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kSize = 2048;  // 17.2 GFLOP per GEMM: long enough to reach the peak
constexpr int kTimed = 4;

// The ISA flags that decide which GEMM kernel oneDNN and OpenBLAS run.
constexpr const char* kGemmFlags[] = {"avx2",        "fma",      "avx512f", "avx512_vnni",
                                      "avx512_bf16", "amx_tile", "amx_bf16"};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

nlohmann::json read_cache(const fs::path& cache) {
  std::ifstream in(cache);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object() && j.contains("entries") && j["entries"].is_array()) return j;
  } catch (const nlohmann::json::exception&) {
  }
  H2_LOG_WARN("{}: not a CPU peak cache (ignored; it will be rewritten)", cache.string());
  return nlohmann::json::object();
}

void write_cache(const fs::path& cache, const nlohmann::json& j) {
  std::error_code ec;
  fs::create_directories(cache.parent_path(), ec);
  const fs::path tmp = cache.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) {
      fs::remove(tmp, ec);
      H2_LOG_WARN("cannot write the CPU peak cache {} (the peak will be measured again)",
                  cache.string());
      return;
    }
  }
  fs::rename(tmp, cache, ec);  // atomic: a concurrent reader sees the old file or the new one
  if (ec) fs::remove(tmp, ec);
}

// An exclusive flock on `<cache>.lock` for the lifetime of the object: ranks of one job start
// together, and each measuring beside the others would cache a fraction of the peak. The first
// measures; the rest wait here and then read its figure. No lock (an unwritable folder) only
// loses that protection.
class CacheLock {
 public:
  explicit CacheLock(const fs::path& cache) {
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    fd_ = ::open((cache.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

// The value of a /proc/cpuinfo line "key<tabs>: value" whose key is exactly `key` ("model" is not
// "model name").
std::optional<std::string> cpuinfo_value(const std::string& line, std::string_view key) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos || line.rfind(key, 0) != 0 ||
      line.find_first_not_of(" \t", key.size()) != colon)
    return std::nullopt;
  const size_t start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? std::string() : line.substr(start);
}

}  // namespace

CpuIdentity CpuIdentity::of_this_machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  return from_cpuinfo(cpuinfo);
}

CpuIdentity CpuIdentity::from_cpuinfo(std::istream& cpuinfo) {
  CpuIdentity id;
  std::optional<std::string> name, family, number, stepping, flags;
  std::string line;
  while (!flags && std::getline(cpuinfo, line)) {  // flags: the first processor's last of these
    for (auto [key, value] : {std::pair{"model name", &name},
                              {"cpu family", &family},
                              {"model", &number},
                              {"stepping", &stepping},
                              {"flags", &flags}})
      if (auto v = cpuinfo_value(line, key); v && !*value) *value = std::move(v);
  }
  if (flags) {
    std::istringstream words(*flags);
    std::vector<std::string> present{std::istream_iterator<std::string>(words), {}};
    for (const char* flag : kGemmFlags)
      if (std::find(present.begin(), present.end(), flag) != present.end()) {
        if (!id.flags.empty()) id.flags += ' ';
        id.flags += flag;
      }
  }
  id.model = name ? *name : "unknown CPU";
  if (family || number)
    id.model += fmt::format(" (family {}, model {}, stepping {})", family.value_or("?"),
                            number.value_or("?"), stepping.value_or("?"));
  return id;
}

fs::path default_peak_cache() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path(xdg) / "h2" / "cpu_peak.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "h2" / "cpu_peak.json";
  return {};
}

namespace {

// CPU seconds the whole machine spent busy so far (/proc/stat's first line: user, nice, system,
// irq, softirq, and steal: a virtual machine's time taken by the host for others, which slows a
// measurement as another process would; USER_HZ ticks), or -1 where it cannot be read.
double machine_busy_seconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu")
    return -1;
  if (!(stat >> steal)) steal = 0;  // kernels before 2.6.11 have no steal column
  return (user + nice + system + irq + softirq + steal) / double(sysconf(_SC_CLK_TCK));
}

double own_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

PeakMeasurement measure_gemm_peak(KernelContext& context, int threads, bool bf16) {
  const double busy0 = machine_busy_seconds(), own0 = own_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  PeakMeasurement m;
  m.gflops = measure_gemm_gflops(context, threads, bf16);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double busy1 = machine_busy_seconds(), own1 = own_cpu_seconds();
  if (busy0 >= 0 && busy1 >= 0)
    m.foreign_cpu_seconds = std::max(0.0, (busy1 - busy0) - (own1 - own0));
  return m;
}

double measure_gemm_gflops(KernelContext& context, int threads, bool bf16) {
  H2_CHECK(
      !bf16 || (context.gemm_provider() == GemmProvider::onednn && context.onednn().native_bf16()),
      "CPU peak: bf16 GEMMs are native only through oneDNN on CPUs with bf16 instructions");
  std::vector<float> a(size_t(kSize * kSize), 0.5f), b(a.size(), 0.25f), c(a.size());
  // bf16 operands: 0.5 and 0.25 are 0x3f00 and 0x3e80 (exact), packed two per float's bytes.
  std::vector<uint16_t> a16(a.size(), 0x3f00), b16(a.size(), 0x3e80);
  auto gemm = [&] {
    if (context.gemm_provider() == GemmProvider::openblas) {
      sgemm(false, true, kSize, kSize, kSize, 1.0f, a.data(), kSize, b.data(), kSize, 0.0f,
            c.data(), kSize);
    } else if (bf16) {
      context.onednn().run(
          {.dims = {.m = kSize, .n = kSize, .k = kSize, .trans_b = true}, .in = DType::bf16},
          a16.data(), b16.data(), c.data(), threads);
    } else {
      context.onednn().run({.dims = {.m = kSize, .n = kSize, .k = kSize, .trans_b = true}},
                           a.data(), b.data(), c.data(), threads);
    }
  };
  gemm();  // warm-up: primitive creation, page faults, frequency ramp
  double best = 1e30;
  for (int i = 0; i < kTimed; ++i) {
    const auto start = std::chrono::steady_clock::now();
    gemm();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  H2_CHECK(c[0] == 0.125f * float(kSize), "CPU peak measurement: the GEMM computed {}, not {}",
           c[0], 0.125f * float(kSize));
  return 2.0 * double(kSize) * double(kSize) * double(kSize) / best / 1e9;
}

CpuPeak cpu_gemm_peak(KernelContext& context, int threads, bool bf16, const fs::path& cache,
                      double max_foreign_share) {
  const CpuIdentity cpu = CpuIdentity::of_this_machine();
  const std::string library = gemm_provider_name(context.gemm_provider());
  // The library's own settings (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE) choose its kernels too.
  const std::string kernels = gemm_kernels_name(context.gemm_provider());
  const std::string dtype = bf16 ? "bf16" : "f32";
  // A capped run (H2_CPU_MAX_ISA) measures the older CPU's kernels: a peak of its own.
  const std::string max_isa = cpu_isa_level_name(cpu_isa_cap());
  const std::string what =
      fmt::format("{} {} GEMM {}^3, {} threads{}", kernels, dtype, kSize, threads,
                  max_isa == "native" ? "" : ", H2_CPU_MAX_ISA=" + max_isa);
  std::optional<CacheLock> lock;
  if (!cache.empty()) lock.emplace(cache);
  nlohmann::json j = cache.empty() ? nlohmann::json::object() : read_cache(cache);
  // Fields compared as JSON values, so that an entry edited by hand into another type is just
  // another key (json::value() would throw, failing every run until the file was deleted).
  auto same_key = [&](const nlohmann::json& e) {
    auto is = [&](const char* key, const nlohmann::json& want) {
      return e.contains(key) && e[key] == want;
    };
    return e.is_object() && is("cpu", cpu.model) && is("flags", cpu.flags) &&
           is("threads", threads) && is("gemm", library) && is("kernels", kernels) &&
           is("dtype", dtype) &&
           (e.contains("max_isa") ? is("max_isa", max_isa) : max_isa == "native");
  };
  if (j.contains("entries") && j["entries"].is_array())
    for (const nlohmann::json& e : j["entries"])
      if (same_key(e) && e.contains("gflops") && e["gflops"].is_number() &&
          e["gflops"].get<double>() > 0) {
        const bool dated = e.contains("measured_at") && e["measured_at"].is_string();
        return {e["gflops"].get<double>(),
                fmt::format("measured on this machine ({}, {}; cached in {})", what,
                            dated ? e["measured_at"].get<std::string>() : "?", cache.string())};
      }

  const PeakMeasurement m = measure_gemm_peak(context, threads, bf16);
  const double gflops = m.gflops;
  if (m.foreign_cpu_seconds > max_foreign_share * m.seconds) {
    H2_LOG_WARN(
        "the CPU peak ({:.1f} GFLOP/s, {}) was measured while other processes used {:.2f} CPU-s of "
        "its {:.2f} s: used for this run, not cached",
        gflops, what, m.foreign_cpu_seconds, m.seconds);
    return {gflops, fmt::format("measured on this machine just now under load ({}; other "
                                "processes used {:.2f} CPU-s of {:.2f} s; not cached)",
                                what, m.foreign_cpu_seconds, m.seconds)};
  }
  if (!cache.empty()) {
    if (!j.contains("entries") || !j["entries"].is_array()) j["entries"] = nlohmann::json::array();
    auto& entries = j["entries"];
    entries.erase(std::remove_if(entries.begin(), entries.end(), same_key), entries.end());
    entries.push_back({{"cpu", cpu.model},
                       {"flags", cpu.flags},
                       {"threads", threads},
                       {"gemm", library},
                       {"kernels", kernels},
                       {"dtype", dtype},
                       {"max_isa", max_isa},
                       {"gflops", gflops},
                       {"measured_at", utc_now()}});
    write_cache(cache, j);
  }
  return {gflops,
          fmt::format("measured on this machine just now ({}; {})", what,
                      cache.empty() ? "not cached: HOME unset" : "cached in " + cache.string())};
}

}  // namespace h2::cpu
