// The CUDA backend: one CudaDevice per visible GPU ("cuda:0", ...), each with a caching device
// allocator, a non-blocking default stream and the kernels of backends/cuda/kernels/. This header
// is what backends/registry.cpp sees, so it names no CUDA type (pimpl through forward-declared
// classes): no CUDA header leaks outside backends/cuda/. device_count() is 0, without error,
// where the driver or the GPU is missing; devices are created on first use of device(i).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "core/op_catalogue.h"

namespace h2::cuda {

class CudaCachingAllocator;
class CudaStream;
class StreamRegistry;

// The CUDA backend's kernel table (backends/cuda/kernel_table.cpp).
const KernelTable& cuda_kernel_table();

class CudaDevice final : public Device {
 public:
  // Reads the GPU's properties and creates its allocator and default stream.
  explicit CudaDevice(int index);
  // Destroys the default stream (after its work), the allocator's cache, then the registry.
  ~CudaDevice() override;

  DeviceId id() const override { return {"cuda", index_}; }
  const DeviceProps& props() const override { return props_; }
  MemoryKind memory_kind() const override { return MemoryKind::device; }
  Allocator& allocator() override;
  Stream& default_stream() override;
  std::unique_ptr<Stream> create_stream() override;
  std::unique_ptr<Event> create_event() override;
  // cudaMemcpyAsync on `stream`; waits for the stream when either side is host memory.
  void copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                  Stream& stream) override;
  const KernelTable& kernels() const override { return cuda_kernel_table(); }

  int index() const { return index_; }

 private:
  int index_;
  DeviceProps props_;
  // Set up in this order, torn down in reverse.
  std::unique_ptr<StreamRegistry> streams_;
  std::unique_ptr<CudaCachingAllocator> allocator_;
  std::unique_ptr<CudaStream> default_stream_;
};

class CudaBackend final : public Backend {
 public:
  // Counts the GPUs; never throws (a missing driver or GPU gives 0, logged at debug level).
  CudaBackend();
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  int device_count() const override { return count_; }
  // Creates the device on first use. Throws h2::Error for an index out of range.
  Device& device(int index) override;

 private:
  int count_ = 0;
  std::mutex mutex_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;  // count_ slots, filled on demand
};

}  // namespace h2::cuda
