// The caching device allocator of one GPU: cudaMalloc'd blocks in size classes (as the CPU
// caching allocator: at most 25% waste), kept on free lists when released so that a training
// step that repeats last step's allocations calls cudaMalloc (and its implicit syncs) no more.
//
// Stream semantics. The Allocator interface names no stream, so blocks belong to the device:
// a freed block may be handed out at once and used by work enqueued on any stream afterwards.
// Safe reuse is guaranteed like this:
//  - with only the default stream alive, stream order alone suffices (the next user's work is
//    enqueued after the last user's), so nothing is recorded;
//  - with side streams alive, deallocate() records an event on every live stream; allocate()
//    makes every live stream wait (cudaStreamWaitEvent, never a host block) on those events
//    that have not completed yet before the block is handed out;
//  - a stream created later first waits for all work on the streams alive then
//    (StreamRegistry::add), which covers blocks freed before it existed.
// A failed cudaMalloc releases the cache and retries once, then throws OutOfMemoryError naming
// the device, the request and the free bytes from cudaMemGetInfo. Thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/cuda_stream.h"
#include "core/device.h"

namespace h2::cuda {

class CudaCachingAllocator final : public Allocator {
 public:
  CudaCachingAllocator(std::string device_name, int device_index, StreamRegistry& streams);
  // Waits for pending users of the cached blocks, then frees them (blocks still handed out
  // are the owners' responsibility: Tensors must not outlive their Runtime).
  ~CudaCachingAllocator() override;
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  void* allocate(size_t bytes) override;
  // Never throws (Storage calls it from a destructor): CUDA failures are logged.
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void release_cache() override;

  // The block size a request is served with: multiples of 512 bytes up to 4 KiB, then four
  // classes per power of two (2^k * {1, 1.25, 1.5, 1.75}).
  static size_t size_class(size_t bytes);

 private:
  struct CachedBlock {
    void* ptr = nullptr;
    std::vector<cudaEvent_t> pending;  // recorded on each live stream when it was freed
  };

  void* system_allocate_locked(size_t block, size_t requested);
  void make_streams_wait_locked(CachedBlock& block);
  void release_cache_locked();
  cudaEvent_t take_event_locked();

  std::string device_name_;
  int device_index_;
  StreamRegistry& streams_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<CachedBlock>> free_blocks_;  // by size class
  std::vector<cudaEvent_t> idle_events_;                    // pool for CachedBlock::pending
  AllocatorStats stats_;
};

}  // namespace h2::cuda
