// The production CPU backend: one device ("cpu:0") that runs every kernel on the calling
// thread with OpenMP workers. Its stream is synchronous: work is complete when the call returns.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "backends/cpu/caching_allocator.h"
#include "backends/cpu/kernel_context.h"
#include "core/device.h"
#include "core/op_catalogue.h"

namespace h2::cpu {

struct CpuOptions {
  int threads = 0;  // 0: OpenMP's default (every core)
  bool caching_allocator = true;
  double peak_gflops = 0;  // peak for MFU figures; 0: measured once and cached (cpu_peak.h)
  GemmProvider gemm = GemmProvider::onednn;
  KBlockKernel kblock_kernel = KBlockKernel::library;  // qmatmul's K-block GEMMs (kernel_context.h)
  // H2_NUM_THREADS, H2_CPU_ALLOCATOR, H2_CPU_PEAK_GFLOPS, H2_CPU_GEMM, H2_CPU_KBLOCK_GEMM
  static CpuOptions from_env();
};

// A synchronous stream: every enqueued kernel has completed when its call returns. Its native
// handle is the device's KernelContext.
class HostStream final : public Stream {
 public:
  HostStream(Device& device, KernelContext& context) : device_(device), context_(context) {}
  Device& device() override { return device_; }
  void synchronize() override {}
  void* native_handle() override { return &context_; }

 private:
  Device& device_;
  KernelContext& context_;
};

// Records the wall-clock time at which the stream's work so far completed.
class HostEvent final : public Event {
 public:
  void record(Stream& stream) override;
  void synchronize() override {}
  double elapsed_ms_since(const Event& start) const override;

 private:
  double seconds_ = 0;
};

// The CPU backend's kernel table (backends/cpu/kernel_table.cpp); virtual chips reuse it.
const KernelTable& cpu_kernel_table();

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(const CpuOptions& options);
  DeviceId id() const override { return {"cpu", 0}; }
  const DeviceProps& props() const override { return props_; }
  MemoryKind memory_kind() const override { return MemoryKind::host; }
  Allocator& allocator() override { return allocator_; }
  Stream& default_stream() override { return stream_; }
  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<HostStream>(*this, context_);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<HostEvent>(); }
  void copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                  Stream& stream) override;
  const KernelTable& kernels() const override { return cpu_kernel_table(); }
  // H2_CPU_PEAK_GFLOPS when set, else this machine's measured GEMM peak (cpu_peak.h), measured
  // on the first call and cached; bf16 has its own where oneDNN multiplies it natively.
  Peak mfu_peak(DType dtype) override;

 private:
  double peak_gflops_setting_ = 0;  // H2_CPU_PEAK_GFLOPS
  std::mutex peak_mutex_;
  std::map<bool, Peak> measured_peaks_;  // by "bf16 native"
  DeviceProps props_;
  CachingHostAllocator allocator_;
  KernelContext context_;  // before stream_, which refers to it
  HostStream stream_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& options = CpuOptions::from_env()) : device_(options) {}
  std::string name() const override { return "cpu"; }
  int device_count() const override { return 1; }
  Device& device(int index) override;

 private:
  CpuDevice device_;
};

// Threads the CPU kernels use.
int cpu_threads();

}  // namespace h2::cpu
