// Virtual chips: devices that emulate other accelerators on the CPU so a heterogeneous cluster
// can run and be tested on one machine. Each has its own memory pool (capacity from its
// ChipSpec; host code must copy in and out explicitly), runs the CPU backend's kernels (so
// results are bit-identical to cpu:0), and paces each kernel so that it completes no earlier
// than the chip's modelled time: (flops / peak[dtype] + bytes / memory_bandwidth) * time_scale.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/caching_allocator.h"
#include "backends/cpu/kernel_context.h"
#include "backends/vchip/chip_spec.h"
#include "core/device.h"
#include "core/op_catalogue.h"
#include "core/op_cost.h"

namespace h2::vchip {

class VchipDevice;

// A synchronous stream that sleeps after each kernel until the modelled time has passed. Its
// clock runs on: a kernel the host issues within kQueueSlack of the previous one's end starts at
// that end, as on an asynchronous chip whose queue hides the host's bookkeeping and the sleep's
// wake-up latency, so that pacing errors do not accumulate over many small kernels. A kernel
// whose real time exceeds its modelled time is an overrun (PacingStats).
class PacedStream final : public Stream {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PacedStream(VchipDevice& device) : device_(device) {}
  Device& device() override;
  void synchronize() override {}
  // The chip's cpu::KernelContext: its kernels are the CPU backend's.
  void* native_handle() override;
  // Called by kernels after running: sleeps until started + modelled time.
  void pace(const OpCost& cost, Clock::time_point started);
  // Same for a copy of `bytes` over the host link.
  void pace_copy(double bytes, Clock::time_point started);
  double modelled_seconds() const { return modelled_seconds_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::chrono::microseconds kQueueSlack{1000};
  void sleep_until(Clock::time_point started, double seconds);
  VchipDevice& device_;
  std::atomic<double> modelled_seconds_ = 0;  // sum over every paced kernel and copy
  Clock::time_point deadline_{};              // when the last paced kernel ends
};

class VchipDevice final : public Device {
 public:
  // time_scale multiplies the spec's own time_scale (H2_VCHIP_TIME_SCALE); 0 disables pacing.
  VchipDevice(const ChipSpec& spec, int index, double time_scale);
  DeviceId id() const override { return {"vchip", index_}; }
  const DeviceProps& props() const override { return props_; }
  MemoryKind memory_kind() const override { return MemoryKind::device; }
  Allocator& allocator() override { return allocator_; }
  Stream& default_stream() override { return stream_; }
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  void copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                  Stream& stream) override;
  const KernelTable& kernels() const override { return kernels_; }

  const ChipSpec& spec() const { return spec_; }
  double time_scale() const { return time_scale_; }
  // Modelled seconds of `cost` on this chip, before time_scale.
  double modelled_seconds(const OpCost& cost) const;
  std::optional<PacingStats> pacing() const override;
  // Called by the chip's streams for every paced kernel or copy.
  void record_pacing(double modelled_s, double overrun_s);
  cpu::KernelContext& kernel_context() { return context_; }

 private:
  ChipSpec spec_;
  int index_;
  double time_scale_;
  DeviceProps props_;
  cpu::CachingHostAllocator allocator_;
  cpu::KernelContext context_;  // the CPU kernels' state (GEMM library) for this chip
  PacedStream stream_;
  KernelTable kernels_;
  mutable std::mutex pacing_mutex_;
  PacingStats pacing_;
};

class VchipBackend final : public Backend {
 public:
  // One device per chip (`count` of each spec), numbered in order.
  VchipBackend(const std::vector<ChipSpec>& specs, double time_scale);
  std::string name() const override { return "vchip"; }
  int device_count() const override { return int(devices_.size()); }
  Device& device(int index) override;

 private:
  std::vector<std::unique_ptr<VchipDevice>> devices_;
};

}  // namespace h2::vchip
