// Sets the CPU kernels' thread count for a scope, for tests of kernels that split their work among
// threads. The setting is process-wide, so it holds for every CPU-backed device (cpu, vchip).
#pragma once

#include "backends/cpu/kernels/cpu_parallel.h"

namespace h2::test {

class CpuKernelThreads {
 public:
  explicit CpuKernelThreads(int threads) : saved_(cpu::kernel_thread_setting().load()) {
    cpu::kernel_thread_setting().store(threads);
  }
  ~CpuKernelThreads() { cpu::kernel_thread_setting().store(saved_); }
  CpuKernelThreads(const CpuKernelThreads&) = delete;
  CpuKernelThreads& operator=(const CpuKernelThreads&) = delete;

 private:
  int saved_;
};

}  // namespace h2::test
