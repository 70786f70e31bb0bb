// A caching host-memory allocator. Freed blocks go to per-size-class free lists and are handed
// out again, so a training loop that repeats the same allocations each step makes no system
// allocations (and takes no page faults) after its first step. Size classes waste at most 25%.
// An optional capacity turns it into a device memory pool (virtual chips): reserved bytes never
// exceed it, and a request that cannot fit even after releasing the cache throws
// OutOfMemoryError naming the device, the request and the free bytes. Without a capacity (the
// host's own memory) it watches what the kernel can still give (MemAvailable) as its reservations
// grow, and refuses a request that would not fit with an OutOfMemoryError rather than let the
// kernel's OOM killer end the process without a word. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"

namespace h2::cpu {

class CachingHostAllocator final : public Allocator {
 public:
  // capacity_bytes 0 means unlimited. `caching` false gives plain malloc/free (for comparison).
  CachingHostAllocator(std::string device_name, int64_t capacity_bytes, bool caching = true);
  ~CachingHostAllocator() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void release_cache() override;

  // The block size a request is served with.
  static size_t size_class(size_t bytes);

  // What the kernel can still give this process (MemAvailable of /proc/meminfo), in bytes; -1
  // where it cannot be read.
  static int64_t available_host_memory();

 private:
  size_t block_size(size_t bytes) const;  // what a request of `bytes` reserves
  void release_cache_locked();

  std::string device_name_;
  int64_t capacity_;
  bool caching_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_blocks_;  // by size class
  AllocatorStats stats_;
  int64_t next_host_check_ = 0;  // reserved bytes past which MemAvailable is read again
};

}  // namespace h2::cpu
