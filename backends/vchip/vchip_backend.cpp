// Virtual chip devices: memory pool, pacing and the paced kernel table (see vchip_backend.h).
#include "backends/vchip/vchip_backend.h"

#include <cstring>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/env.h"
#include "core/error.h"

namespace h2::vchip {
namespace {

// Runs the CPU kernel, then holds the stream until the chip's modelled time has passed.
template <class Args, KernelFn<Args> Kernel, OpCost (*Cost)(const Args&)>
void paced_kernel(const Args& args, Stream& stream) {
  OpCost cost = Cost(args);  // before the kernel: a costing error must not follow a write
  auto started = PacedStream::Clock::now();
  Kernel(args, stream);
  static_cast<PacedStream&>(stream).pace(cost, started);
}

KernelTable make_paced_table(DTypeSet chip_dtypes) {
  const KernelTable& cpu_table = cpu::cpu_kernel_table();
  KernelTable table;
#define H2_OP(name, Args, layout, summary)                       \
  table.name = &paced_kernel<Args, &cpu::name, &op_cost_##name>; \
  table.name##_dtypes = cpu_table.name##_dtypes & chip_dtypes;
#include "core/ops.def"
#undef H2_OP
  return table;
}

}  // namespace

Device& PacedStream::device() {
  return device_;
}

void* PacedStream::native_handle() {
  return &device_.kernel_context();
}

void PacedStream::sleep_until(Clock::time_point started, double seconds) {
  modelled_seconds_.fetch_add(seconds, std::memory_order_relaxed);
  const double scaled = seconds * device_.time_scale();
  if (scaled <= 0) return;
  const Clock::time_point start =
      started >= deadline_ && started - deadline_ < kQueueSlack ? deadline_ : started;
  deadline_ =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(scaled));
  const Clock::time_point now = Clock::now();
  if (now > deadline_) {  // the host took longer than the chip would have
    device_.record_pacing(scaled, std::chrono::duration<double>(now - deadline_).count());
    deadline_ = now;
    return;
  }
  device_.record_pacing(scaled, 0);
  std::this_thread::sleep_until(deadline_);
}

void PacedStream::pace(const OpCost& cost, Clock::time_point started) {
  sleep_until(started, device_.modelled_seconds(cost));
}

void PacedStream::pace_copy(double bytes, Clock::time_point started) {
  sleep_until(started, bytes / device_.spec().link_bandwidth);
}

VchipDevice::VchipDevice(const ChipSpec& spec, int index, double time_scale)
    : spec_(spec),
      index_(index),
      time_scale_(time_scale * spec.time_scale),
      allocator_(fmt::format("vchip:{} ({})", index, spec.name), spec.memory_bytes),
      context_(cpu::parse_gemm_provider(env_string("H2_CPU_GEMM"), "H2_CPU_GEMM"),
               cpu::kblock_kernel_from_env()),
      stream_(*this),
      kernels_(make_paced_table(spec.dtypes)) {
  props_.name = spec.name;
  props_.memory_bytes = spec.memory_bytes;
  props_.memory_bandwidth = spec.memory_bandwidth;
  props_.peak_flops = spec.peak_flops;
  props_.dtypes = spec.dtypes;
}

std::optional<PacingStats> VchipDevice::pacing() const {
  std::lock_guard lock(pacing_mutex_);
  return pacing_;
}

void VchipDevice::record_pacing(double modelled_s, double overrun_s) {
  std::lock_guard lock(pacing_mutex_);
  ++pacing_.events;
  pacing_.modelled_s += modelled_s;
  if (overrun_s > 0) {
    ++pacing_.overruns;
    pacing_.overrun_s += overrun_s;
  }
}

std::unique_ptr<Stream> VchipDevice::create_stream() {
  return std::make_unique<PacedStream>(*this);
}

std::unique_ptr<Event> VchipDevice::create_event() {
  return std::make_unique<cpu::HostEvent>();
}

double VchipDevice::modelled_seconds(const OpCost& cost) const {
  double seconds = cost.bytes / spec_.memory_bandwidth;
  if (cost.flops > 0) {
    double peak = props_.peak(cost.dtype);
    if (peak <= 0) peak = props_.peak(DType::f32);
    H2_CHECK(peak > 0, "{} has no peak_flops for {} or f32", str(), dtype_name(cost.dtype));
    seconds += cost.flops / peak;
  }
  return seconds;
}

void VchipDevice::copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device,
                             size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  auto started = PacedStream::Clock::now();
  std::memmove(dst, src, bytes);
  auto& paced = static_cast<PacedStream&>(stream);
  if (dst_on_device && src_on_device)
    paced.pace(OpCost{0, 2.0 * double(bytes), DType::u8}, started);  // read + write on chip
  else
    paced.pace_copy(double(bytes), started);
}

VchipBackend::VchipBackend(const std::vector<ChipSpec>& specs, double time_scale) {
  for (const ChipSpec& spec : specs)
    for (int i = 0; i < spec.count; ++i)
      devices_.push_back(std::make_unique<VchipDevice>(spec, int(devices_.size()), time_scale));
}

Device& VchipBackend::device(int index) {
  H2_CHECK(index >= 0 && index < device_count(), "vchip:{} does not exist ({} virtual chips)",
           index, device_count());
  return *devices_[size_t(index)];
}

}  // namespace h2::vchip
