// Stream registry, streams and events (see cuda_stream.h).
#include "backends/cuda/cuda_stream.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::cuda {

void StreamRegistry::add(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  for (cudaStream_t other : streams_) {
    OwnedEvent marker(cudaEventDisableTiming);  // destroying it after the wait is allowed
    H2_CUDA_CHECK(cudaEventRecord(marker.get(), other));
    H2_CUDA_CHECK(cudaStreamWaitEvent(stream, marker.get(), 0));
  }
  streams_.push_back(stream);
}

void StreamRegistry::remove(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

CudaStream::CudaStream(Device& device, int device_index, StreamRegistry& registry)
    : device_(device), device_index_(device_index), registry_(registry) {
  DeviceGuard guard(device_index_);
  H2_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  try {
    registry_.add(stream_);
  } catch (...) {
    cudaStreamDestroy(stream_);
    throw;
  }
}

CudaStream::~CudaStream() {
  try {
    DeviceGuard guard(device_index_);
    cudaError_t status = cudaStreamSynchronize(stream_);
    if (status != cudaSuccess)
      H2_LOG_ERROR("cuda:{}: stream failed while being destroyed: {}", device_index_,
                   cudaGetErrorString(status));
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    registry_.remove(stream_);
    cudaStreamDestroy(stream_);
  } catch (const std::exception& e) {
    H2_LOG_ERROR("cuda:{}: destroying a stream: {}", device_index_, e.what());
  }
}

void CudaStream::synchronize() {
  DeviceGuard guard(device_index_);
  H2_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

cublasHandle_t CudaStream::cublas() {
  if (cublas_ == nullptr) {
    DeviceGuard guard(device_index_);
    cublasHandle_t handle = nullptr;
    H2_CUBLAS_CHECK(cublasCreate(&handle));
    cublasStatus_t status = cublasSetStream(handle, stream_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      H2_CUBLAS_CHECK(status);
    }
    cublas_ = handle;
  }
  return cublas_;
}

CudaStream& as_cuda_stream(Stream& stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(&stream);
  H2_CHECK(cuda_stream != nullptr, "a stream of {} is not a CUDA stream", stream.device().str());
  return *cuda_stream;
}

CudaEvent::CudaEvent(int device_index) : device_index_(device_index) {
  DeviceGuard guard(device_index_);
  H2_CUDA_CHECK(cudaEventCreate(&event_));  // with timing: elapsed_ms_since needs it
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void CudaEvent::record(Stream& stream) {
  CudaStream& cuda_stream = as_cuda_stream(stream);
  H2_CHECK(cuda_stream.device_index() == device_index_,
           "an event of cuda:{} recorded on a stream of cuda:{}", device_index_,
           cuda_stream.device_index());
  DeviceGuard guard(device_index_);
  H2_CUDA_CHECK(cudaEventRecord(event_, cuda_stream.raw()));
}

void CudaEvent::synchronize() {
  H2_CUDA_CHECK(cudaEventSynchronize(event_));
}

double CudaEvent::elapsed_ms_since(const Event& start) const {
  auto* cuda_start = dynamic_cast<const CudaEvent*>(&start);
  H2_CHECK(cuda_start != nullptr, "elapsed_ms_since: the start event is not a CUDA event");
  float ms = 0;
  H2_CUDA_CHECK(cudaEventElapsedTime(&ms, cuda_start->event_, event_));
  return double(ms);
}

}  // namespace h2::cuda
