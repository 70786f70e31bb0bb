// Device guard and owned events (see cuda_guard.h).
#include "backends/cuda/cuda_guard.h"

#include "backends/cuda/cuda_check.h"

namespace h2::cuda {

DeviceGuard::DeviceGuard(int device_index) : current_(device_index) {
  H2_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != current_) H2_CUDA_CHECK(cudaSetDevice(current_));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != current_) cudaSetDevice(previous_);  // best effort
}

OwnedEvent::OwnedEvent(unsigned flags) {
  H2_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

OwnedEvent::~OwnedEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void OwnedEvent::record(cudaStream_t stream) {
  H2_CUDA_CHECK(cudaEventRecord(event_, stream));
}

}  // namespace h2::cuda
