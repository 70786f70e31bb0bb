// CUDA streams and events behind the Stream/Event interfaces, and StreamRegistry (the live
// streams of one device, which the caching allocator orders block reuse against). The RAII pieces
// every CUDA call site needs (DeviceGuard, OwnedEvent) are in cuda_guard.h.
// Streams are non-blocking (never implicitly synchronised with the legacy null stream); each
// owns a lazily created cuBLAS handle bound to it, since a handle must not be shared by two
// threads and a Stream is used by one thread at a time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

#include "backends/cuda/cuda_guard.h"
#include "core/device.h"

namespace h2::cuda {

// The live streams of one device. Thread-safe. Callers have made the device current.
class StreamRegistry {
 public:
  // Registers `stream` after making it wait for all work already enqueued on the live streams,
  // so that memory freed before it existed is never touched by it too early.
  void add(cudaStream_t stream);
  void remove(cudaStream_t stream);
  // Calls fn(stream) for every live stream; holds the lock, so none is destroyed meanwhile.
  template <class Fn>
  void for_each(Fn&& fn) const {
    std::lock_guard lock(mutex_);
    for (cudaStream_t stream : streams_) fn(stream);
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return streams_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<cudaStream_t> streams_;
};

class CudaStream final : public Stream {
 public:
  // Creates a non-blocking stream on device `device_index` and registers it.
  CudaStream(Device& device, int device_index, StreamRegistry& registry);
  // Waits for the stream's work, then unregisters and destroys it (reverse order of setup).
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Device& device() override { return device_; }
  void synchronize() override;
  void* native_handle() override { return stream_; }

  cudaStream_t raw() const { return stream_; }
  int device_index() const { return device_index_; }
  // This stream's cuBLAS handle (created on first use, bound to the stream).
  cublasHandle_t cublas();

 private:
  Device& device_;
  int device_index_;
  StreamRegistry& registry_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

// The CudaStream behind a Stream; throws h2::Error when it is another backend's stream.
CudaStream& as_cuda_stream(Stream& stream);

// A timing event on one device.
class CudaEvent final : public Event {
 public:
  explicit CudaEvent(int device_index);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void record(Stream& stream) override;
  void synchronize() override;
  double elapsed_ms_since(const Event& start) const override;

 private:
  int device_index_;
  cudaEvent_t event_ = nullptr;
};

}  // namespace h2::cuda
