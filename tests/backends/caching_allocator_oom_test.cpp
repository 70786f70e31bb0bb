// The caching allocator when the system is out of memory: deallocate() runs while the stack
// unwinds from a bad_alloc (a model too large to build) and must not throw a second one, which
// would call std::terminate (issue 17: `h2 train --set model.n_layers=100000000` aborted). This
// binary replaces the global operator new so that a test can make the next allocations fail.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "backends/cpu/caching_allocator.h"

namespace {
thread_local bool fail_allocations = false;
}  // namespace

// The replacements pair malloc with free by design; GCC 12 sees `new T` (gtest's) reach free()
// and warns of a mismatch it cannot tell from a replacement.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t bytes) {
  if (fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop

namespace h2::cpu {
namespace {

TEST(CachingAllocatorOutOfMemory, DeallocateWithoutMemoryFreesTheBlockInsteadOfThrowing) {
  CachingHostAllocator allocator("cpu:0", 0);
  void* block = allocator.allocate(1000);
  const int64_t reserved = allocator.stats().bytes_reserved;
  ASSERT_GT(reserved, 0);
  fail_allocations = true;  // caching a block of a new size class needs a new free list
  EXPECT_NO_THROW(allocator.deallocate(block, 1000));
  fail_allocations = false;
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
  EXPECT_EQ(allocator.stats().bytes_reserved,
            reserved - int64_t(CachingHostAllocator::size_class(1000)))
      << "the block went back to the system";
  // With memory again, freed blocks are cached as before.
  void* again = allocator.allocate(1000);
  allocator.deallocate(again, 1000);
  EXPECT_EQ(allocator.stats().bytes_reserved, int64_t(CachingHostAllocator::size_class(1000)));
}

}  // namespace
}  // namespace h2::cpu
