// The caching allocator: steady-state reuse makes no system allocations, size classes waste at
// most 25%, and a capacity is enforced with an error that names the device and the numbers.
#include <gtest/gtest.h>

#include "backends/cpu/caching_allocator.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

TEST(CachingAllocator, SizeClassesBoundWaste) {
  for (size_t bytes :
       {1ul, 63ul, 64ul, 4096ul, 4097ul, 100000ul, 1ul << 20, (1ul << 20) + 1, 123456789ul}) {
    size_t block = CachingHostAllocator::size_class(bytes);
    EXPECT_GE(block, bytes);
    EXPECT_LE(double(block), std::max(64.0, 1.25 * double(bytes))) << bytes;
    EXPECT_EQ(block % 64, 0u) << bytes;
  }
}

TEST(CachingAllocator, SteadyStateMakesNoSystemAllocations) {
  CachingHostAllocator allocator("cpu:0", 0);
  const std::vector<size_t> step = {1 << 20, 3000, 5 << 20, 77, 1 << 20};
  auto run_step = [&] {
    std::vector<void*> live;
    for (size_t bytes : step) live.push_back(allocator.allocate(bytes));
    for (size_t i = 0; i < step.size(); ++i) allocator.deallocate(live[i], step[i]);
  };
  run_step();
  int64_t after_first = allocator.stats().system_allocations;
  EXPECT_EQ(after_first, int64_t(step.size()));
  for (int i = 0; i < 10; ++i) run_step();
  EXPECT_EQ(allocator.stats().system_allocations, after_first);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
  EXPECT_EQ(allocator.stats().allocations, 11 * int64_t(step.size()));
}

TEST(CachingAllocator, CapacityIsEnforcedWithANamedError) {
  CachingHostAllocator allocator("vchip:3 (chip-a)", 1 << 20);
  void* a = allocator.allocate(600 << 10);
  try {
    allocator.allocate(600 << 10);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("vchip:3 (chip-a) is out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("asked for 614400 bytes"), std::string::npos) << msg;
  }
  allocator.deallocate(a, 600 << 10);
  // The cached block is released to make room for a different size class.
  void* b = allocator.allocate(900 << 10);
  EXPECT_NE(b, nullptr);
  allocator.deallocate(b, 900 << 10);
}

TEST(CachingAllocator, ImpossibleRequestIsOutOfMemory) {
  CachingHostAllocator allocator("cpu:0", 0);
  EXPECT_THROW(allocator.allocate(~size_t(0) - 5), OutOfMemoryError);
}

// The host's allocator refuses what the kernel cannot give (a model that outgrows RAM) with a
// named error instead of being killed by the OOM killer; what fits is still served.
TEST(CachingAllocator, HostMemoryBeyondWhatIsAvailableIsRefusedWithTheFigures) {
  const int64_t available = CachingHostAllocator::available_host_memory();
  ASSERT_GT(available, 0) << "/proc/meminfo has no MemAvailable";
  CachingHostAllocator allocator("cpu:0", 0);
  try {
    allocator.allocate(size_t(available) + (size_t(1) << 30));
    FAIL() << "a request past MemAvailable was accepted";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("MemAvailable"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu:0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(allocator.stats().bytes_reserved, 0);
  void* small = allocator.allocate(size_t(1) << 20);
  EXPECT_NE(small, nullptr);
  allocator.deallocate(small, size_t(1) << 20);
}

}  // namespace
}  // namespace h2::cpu
