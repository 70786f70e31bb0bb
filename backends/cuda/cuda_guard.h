// The small RAII pieces every CUDA call site needs, in the backend and in the NCCL communicator
// (comm/vendors/nccl) alike: DeviceGuard (the right current device for a scope) and OwnedEvent (a
// cudaEvent_t destroyed with its owner). Failures throw h2::Error through H2_CUDA_CHECK.
#pragma once

#include <cuda_runtime_api.h>

namespace h2::cuda {

// Makes `device_index` current for the guard's lifetime, then restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device_index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int current_ = -1;
};

// A cudaEvent_t owned by this object (created on the current device).
class OwnedEvent {
 public:
  explicit OwnedEvent(unsigned flags);
  ~OwnedEvent();
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  // Records the work enqueued on `stream` so far.
  void record(cudaStream_t stream);

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace h2::cuda
