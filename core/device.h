// The device abstraction (DiTorch-style). A Backend is one vendor runtime ("cpu", "cuda", "vchip");
// it owns its Devices; a Device owns its Allocator, default Stream and kernel table. All of them
// live as long as the Runtime that registered them. Every method states its contract:
// whether it blocks, who owns what, whether it is thread-safe, whether it is optional.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace h2 {

class Runtime;
class Device;
struct KernelTable;
enum class Op : uint16_t;

struct DeviceId {
  std::string backend;  // "cpu", "cuda", "vchip"
  int index = 0;        // within the backend
  std::string str() const { return backend + ":" + std::to_string(index); }
  bool operator==(const DeviceId&) const = default;
};

// Where a device's memory lives. Never assume: a virtual chip is CPU-executed but its memory is
// "device" memory that host code must copy in and out of explicitly.
enum class MemoryKind { host, device };

// What the planner and the pacing model know about a chip.
struct DeviceProps {
  std::string name;                    // chip type, e.g. "Intel Xeon (2 threads)", "chip-a"
  int64_t memory_bytes = 0;            // capacity usable for tensors
  double memory_bandwidth = 0;         // bytes/s
  std::map<DType, double> peak_flops;  // FLOP/s by compute dtype (dense GEMM)
  DTypeSet dtypes;                     // storage dtypes kernels accept
  double peak(DType t) const;          // 0 when unknown
  // Whether the chip multiplies `t` natively: it has a peak_flops entry. For the FP8/FP4 code
  // dtypes (f8e4m3, f8e5m2, f4e2m1) an absent entry means qmatmul emulates the format (decoding to
  // FP32, paced at the f32 rate): what the planner reads to place low-precision stages.
  bool native_gemm(DType t) const { return peak_flops.contains(t); }
};

// Emulated hardware (virtual chips, paced links): how often the host's real time overran the
// modelled time. Emulation is honest only while overruns are rare: a chip whose kernels the host
// cannot compute within their modelled time measures the host, not the chip.
struct PacingStats {
  int64_t events = 0;     // paced kernels, copies or transfers
  int64_t overruns = 0;   // of them, the ones that took longer in reality than modelled
  double modelled_s = 0;  // their modelled time (time scale applied)
  double overrun_s = 0;   // real time beyond the modelled time, summed
  double overrun_share() const { return modelled_s > 0 ? overrun_s / modelled_s : 0.0; }
  PacingStats& operator+=(const PacingStats& o) {
    events += o.events, overruns += o.overruns, modelled_s += o.modelled_s,
        overrun_s += o.overrun_s;
    return *this;
  }
};

struct AllocatorStats {
  int64_t bytes_in_use = 0;        // handed out and not yet returned
  int64_t peak_bytes_in_use = 0;   // high-water mark of bytes_in_use
  int64_t bytes_reserved = 0;      // held from the system, including the cache
  int64_t system_allocations = 0;  // calls to the system allocator (malloc, cudaMalloc, ...)
  int64_t allocations = 0;         // calls to allocate()
};

// Device memory. Thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` (64-byte aligned; nullptr for 0 bytes). Blocks belong to the device,
  // not a stream: a backend with asynchronous streams makes reuse safe across its streams.
  // Throws OutOfMemoryError naming the device, the request and the free bytes. Does not block.
  virtual void* allocate(size_t bytes) = 0;
  // Returns memory from allocate(); `bytes` must be the size that was asked for.
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  // Restarts the high-water mark at the bytes in use now (to measure one phase's peak).
  virtual void reset_peak() = 0;
  // Gives cached blocks back to the system. Optional: a no-op where nothing is cached.
  virtual void release_cache() {}
};

// An ordered queue of work on one device. Not thread-safe: one thread enqueues at a time.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device& device() = 0;
  // Blocks until all work enqueued so far has completed.
  virtual void synchronize() = 0;
  // The vendor's stream (cudaStream_t for CUDA); nullptr where there is none.
  virtual void* native_handle() { return nullptr; }
};

// A marker in a stream, for timing and cross-stream ordering.
class Event {
 public:
  virtual ~Event() = default;
  // Marks the point after all work enqueued on `stream` so far. Does not block.
  virtual void record(Stream& stream) = 0;
  // Blocks until the recorded work has completed.
  virtual void synchronize() = 0;
  // Milliseconds between `start` and this event; both must have completed.
  virtual double elapsed_ms_since(const Event& start) const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceId id() const = 0;
  virtual const DeviceProps& props() const = 0;
  virtual MemoryKind memory_kind() const = 0;
  virtual Allocator& allocator() = 0;
  // The stream ops use when the caller passes none. Owned by the device.
  virtual Stream& default_stream() = 0;
  virtual std::unique_ptr<Stream> create_stream() = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  // Copies `bytes` between this device's memory and host memory, or within this device
  // (direction by which pointer belongs where: `dst_on_device`/`src_on_device`). Ordered on
  // `stream`; returns when the host side may be reused (host copies are synchronous).
  virtual void copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device,
                          size_t bytes, Stream& stream) = 0;
  // The kernels this device runs; a null slot is "unsupported".
  virtual const KernelTable& kernels() const = 0;
  // Whether `op` runs here on tensors of storage dtype `dtype`.
  bool supports(Op op, DType dtype) const;
  // Whether this one call of `op` runs here (`args`: op's Args struct): its key dtype, and the
  // shapes the kernel takes (a kernel may refuse shapes it does not implement, e.g. CUDA
  // attention over a head dim of 256). Empty when it runs; else why not. Dispatch runs a call
  // refused for its shape on the CPU instead, with a warning.
  template <class Args>
  std::string refusal(Op op, const Args& args) const {
    return refusal(op, args.key_dtype(), &args);
  }
  // The same with the args struct type-erased (`args` must point to op's Args struct).
  std::string refusal(Op op, DType key_dtype, const void* args) const;

  // Emulated devices: how often the host overran the modelled time since creation (PacingStats);
  // nullopt for real devices.
  virtual std::optional<PacingStats> pacing() const { return std::nullopt; }

  // The dense-GEMM peak that MFU figures divide by, and where it came from. By default the
  // device's own figure (props().peak); the CPU measures its machine's (cached, or
  // H2_CPU_PEAK_GFLOPS), which may take half a second on its first call.
  struct Peak {
    double flops = 0;    // FLOP/s; 0 when unknown
    std::string source;  // e.g. "chip-a's spec", "measured on this machine (...)"
  };
  virtual Peak mfu_peak(DType dtype) { return {props().peak(dtype), props().name + "'s spec"}; }

  // The runtime that registered this device (fallback and autocompare need the CPU device).
  Runtime& runtime() const;
  void attach_runtime(Runtime* runtime) { runtime_ = runtime; }
  std::string str() const { return id().str(); }

 private:
  Runtime* runtime_ = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Never throws; 0 when the driver or hardware is missing.
  virtual int device_count() const = 0;
  // Throws h2::Error for an index out of range. The device lives as long as the backend.
  virtual Device& device(int index) = 0;
};

}  // namespace h2
