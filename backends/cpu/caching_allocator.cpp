// Size classes, free lists and capacity accounting (see caching_allocator.h).
#include "backends/cpu/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/error.h"
#include "core/size_class.h"

namespace h2::cpu {
namespace {
constexpr size_t kAlignment = 64;
// Host memory left to the rest of the process and the system when a request is refused.
constexpr int64_t kHostReserve = int64_t(256) << 20;
}  // namespace

int64_t CachingHostAllocator::available_host_memory() {
  std::FILE* meminfo = std::fopen("/proc/meminfo", "r");
  if (meminfo == nullptr) return -1;
  char line[256];
  long long kib = -1;
  while (std::fgets(line, sizeof(line), meminfo) != nullptr)
    if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  std::fclose(meminfo);
  return kib < 0 ? -1 : int64_t(kib) * 1024;
}

CachingHostAllocator::CachingHostAllocator(std::string device_name, int64_t capacity_bytes,
                                           bool caching)
    : device_name_(std::move(device_name)), capacity_(capacity_bytes), caching_(caching) {}

CachingHostAllocator::~CachingHostAllocator() {
  release_cache_locked();
}

size_t CachingHostAllocator::size_class(size_t bytes) {
  return allocation_size_class(bytes, kAlignment);
}

size_t CachingHostAllocator::block_size(size_t bytes) const {
  return caching_ ? size_class(bytes) : (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

void* CachingHostAllocator::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > (size_t(1) << 60))
    H2_THROW(OutOfMemoryError, "{}: asked for {} bytes, more than any memory", device_name_, bytes);
  size_t block = block_size(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.allocations;
  if (caching_) {
    auto it = free_blocks_.find(block);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      stats_.bytes_in_use += int64_t(block);
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      return ptr;
    }
  }
  if (capacity_ > 0 && stats_.bytes_reserved + int64_t(block) > capacity_) release_cache_locked();
  if (capacity_ > 0 && stats_.bytes_reserved + int64_t(block) > capacity_)
    H2_THROW(OutOfMemoryError,
             "{} is out of memory: asked for {} bytes, {} of {} bytes free ({} in use)",
             device_name_, bytes, capacity_ - stats_.bytes_reserved, capacity_,
             stats_.bytes_in_use);
  // The host's memory: MemAvailable is read again each time the reservations grow by an eighth
  // of what was available at the last reading (at least 64 MiB), so its cost stays negligible.
  if (capacity_ == 0 && stats_.bytes_reserved + int64_t(block) > next_host_check_) {
    const int64_t available = available_host_memory();
    if (available >= 0 && int64_t(block) > available - kHostReserve)
      H2_THROW(OutOfMemoryError,
               "{}: asked for {:.1f} MiB, but the host has only {:.1f} MiB available "
               "(MemAvailable; {:.1f} MiB already reserved by this device): use a smaller model "
               "or batch, or a machine with more memory",
               device_name_, double(block) / (1 << 20), double(available) / (1 << 20),
               double(stats_.bytes_reserved) / (1 << 20));
    next_host_check_ = stats_.bytes_reserved + int64_t(block) +
                       std::max<int64_t>(available / 8, int64_t(64) << 20);
  }
  void* ptr = std::aligned_alloc(kAlignment, block);
  if (ptr == nullptr)
    H2_THROW(OutOfMemoryError, "{}: the system refused {} bytes ({} bytes reserved)", device_name_,
             block, stats_.bytes_reserved);
  ++stats_.system_allocations;
  stats_.bytes_reserved += int64_t(block);
  stats_.bytes_in_use += int64_t(block);
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingHostAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t block = block_size(bytes);
  std::lock_guard lock(mutex_);
  stats_.bytes_in_use -= int64_t(block);
  if (caching_) {
    // Caching may need memory (a new list, a longer one); deallocate runs while stacks unwind
    // from a failed allocation, where a second bad_alloc would end the process: give the block
    // back to the system instead.
    try {
      free_blocks_[block].push_back(ptr);
      return;
    } catch (const std::bad_alloc&) {
    }
  }
  std::free(ptr);
  stats_.bytes_reserved -= int64_t(block);
}

AllocatorStats CachingHostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingHostAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingHostAllocator::release_cache() {
  std::lock_guard lock(mutex_);
  release_cache_locked();
}

void CachingHostAllocator::release_cache_locked() {
  for (auto& [block, pointers] : free_blocks_) {
    for (void* ptr : pointers) std::free(ptr);
    stats_.bytes_reserved -= int64_t(block * pointers.size());
  }
  free_blocks_.clear();
}

}  // namespace h2::cpu
