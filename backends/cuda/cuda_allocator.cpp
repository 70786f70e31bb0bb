// Size classes, free lists, stream ordering of reuse and the OOM path (see cuda_allocator.h).
#include "backends/cuda/cuda_allocator.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "core/log.h"
#include "core/size_class.h"

namespace h2::cuda {

CudaCachingAllocator::CudaCachingAllocator(std::string device_name, int device_index,
                                           StreamRegistry& streams)
    : device_name_(std::move(device_name)), device_index_(device_index), streams_(streams) {}

CudaCachingAllocator::~CudaCachingAllocator() {
  try {
    DeviceGuard guard(device_index_);
    std::lock_guard lock(mutex_);
    release_cache_locked();
    for (cudaEvent_t event : idle_events_) cudaEventDestroy(event);
    idle_events_.clear();
  } catch (const std::exception& e) {
    H2_LOG_ERROR("{}: releasing the allocator cache: {}", device_name_, e.what());
  }
}

size_t CudaCachingAllocator::size_class(size_t bytes) {
  return allocation_size_class(bytes, 512);
}

void* CudaCachingAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  size_t block = size_class(bytes);
  DeviceGuard guard(device_index_);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  void* ptr = nullptr;
  auto it = free_blocks_.find(block);
  if (it != free_blocks_.end() && !it->second.empty()) {
    CachedBlock cached = std::move(it->second.back());
    it->second.pop_back();
    try {
      make_streams_wait_locked(cached);
    } catch (...) {
      it->second.push_back(std::move(cached));
      throw;
    }
    ptr = cached.ptr;
  } else {
    ptr = system_allocate_locked(block, bytes);
  }
  stats_.bytes_in_use += int64_t(block);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void* CudaCachingAllocator::system_allocate_locked(size_t block, size_t requested) {
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, block);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it, or the next launch check would report it
    H2_LOG_DEBUG("{}: cudaMalloc of {} bytes failed; releasing {} cached bytes and retrying",
                 device_name_, block, stats_.bytes_reserved - stats_.bytes_in_use);
    release_cache_locked();
    status = cudaMalloc(&ptr, block);
  }
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    H2_THROW(OutOfMemoryError,
             "{} is out of memory: asked for {} bytes ({} with size-class rounding), {} of {} "
             "bytes free on the GPU; this allocator holds {} bytes ({} in use)",
             device_name_, requested, block, free_bytes, total_bytes, stats_.bytes_reserved,
             stats_.bytes_in_use);
  }
  H2_CUDA_CHECK(status);
  ++stats_.system_allocations;
  stats_.bytes_reserved += int64_t(block);
  return ptr;
}

void CudaCachingAllocator::make_streams_wait_locked(CachedBlock& block) {
  for (cudaEvent_t event : block.pending) {
    cudaError_t done = cudaEventQuery(event);
    if (done == cudaErrorNotReady) {
      streams_.for_each(
          [&](cudaStream_t stream) { H2_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0)); });
    } else {
      H2_CUDA_CHECK(done);
    }
  }
  // A wait already enqueued does not depend on the event's later re-recording.
  idle_events_.insert(idle_events_.end(), block.pending.begin(), block.pending.end());
  block.pending.clear();
}

cudaEvent_t CudaCachingAllocator::take_event_locked() {
  if (!idle_events_.empty()) {
    cudaEvent_t event = idle_events_.back();
    idle_events_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  H2_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void CudaCachingAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t block = size_class(bytes);
  std::lock_guard lock(mutex_);
  stats_.bytes_in_use -= int64_t(block);
  CachedBlock cached{ptr, {}};
  try {
    DeviceGuard guard(device_index_);
    if (streams_.size() > 1) {
      streams_.for_each([&](cudaStream_t stream) {
        cudaEvent_t event = take_event_locked();
        cached.pending.push_back(event);
        H2_CUDA_CHECK(cudaEventRecord(event, stream));
      });
    }
  } catch (const std::exception& e) {
    // Without its events the block cannot be reused safely: wait for the whole device instead.
    H2_LOG_ERROR("{}: freeing {} bytes: {}; synchronising the device", device_name_, block,
                 e.what());
    cudaDeviceSynchronize();
    idle_events_.insert(idle_events_.end(), cached.pending.begin(), cached.pending.end());
    cached.pending.clear();
  }
  free_blocks_[block].push_back(std::move(cached));
}

AllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CudaCachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CudaCachingAllocator::release_cache() {
  DeviceGuard guard(device_index_);
  std::lock_guard lock(mutex_);
  release_cache_locked();
}

void CudaCachingAllocator::release_cache_locked() {
  if (free_blocks_.empty()) return;
  // A cached block's last users may still be running on any stream: wait for the device once
  // (rare: an explicit release or an allocation that failed) rather than trusting cudaFree.
  H2_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto it = free_blocks_.begin(); it != free_blocks_.end(); it = free_blocks_.erase(it)) {
    std::vector<CachedBlock>& blocks = it->second;
    while (!blocks.empty()) {
      CachedBlock& cached = blocks.back();
      idle_events_.insert(idle_events_.end(), cached.pending.begin(), cached.pending.end());
      cached.pending.clear();
      H2_CUDA_CHECK(cudaFree(cached.ptr));
      stats_.bytes_reserved -= int64_t(it->first);
      blocks.pop_back();
    }
  }
}

}  // namespace h2::cuda
