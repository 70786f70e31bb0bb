// H2_NUM_THREADS (CpuOptions::threads) binds every thread that runs CPU kernels, not only the
// thread that created the Runtime: pipeline stages and ranks call kernels from their own threads.
#include <gtest/gtest.h>

#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/cpu_parallel.h"

namespace h2::cpu {
namespace {

TEST(CpuThreads, SettingReachesOtherThreads) {
  int before = kernel_thread_setting().load();
  CpuBackend backend(CpuOptions{.threads = 1});
  int seen = 0;
  std::thread other([&] { seen = kernel_threads(); });
  other.join();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(cpu_threads(), 1);
  kernel_thread_setting().store(before);
}

}  // namespace
}  // namespace h2::cpu
