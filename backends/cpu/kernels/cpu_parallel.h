// Parallel loops for the CPU kernels: OpenMP with static partitioning, so every thread gets one
// contiguous range and results never depend on timing, and a work threshold below which the loop
// runs on the calling thread (small tensors do not pay the fork/join cost). Loop bodies must not
// throw: kernels validate their arguments before entering a parallel loop.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/fastest_build.h"

namespace h2::cpu {

// The thread count of CPU kernels, one process-wide setting: OpenMP's own (omp_set_num_threads)
// binds only the thread that sets it, so kernels called from pipeline or rank threads would
// ignore H2_NUM_THREADS. CpuDevice sets it; 0 means OpenMP's default.
inline std::atomic<int>& kernel_thread_setting() {
  static std::atomic<int> threads{0};
  return threads;
}
inline int kernel_threads() {
  int threads = kernel_thread_setting().load(std::memory_order_relaxed);
  return threads > 0 ? threads : omp_get_max_threads();
}

// Units of work (about one element touched) below which one extra thread does not pay off.
inline constexpr int64_t kParallelGrain = 1 << 15;

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Calls fn(begin, end) on disjoint ranges that cover [0, n) in order, one range per thread.
// `cost` is the work of one index (elements it touches), used only to pick the thread count.
template <class Fn>
void parallel_for(int64_t n, int64_t cost, Fn&& fn) {
  if (n <= 0) return;
  int64_t useful = std::max<int64_t>(1, n * std::max<int64_t>(cost, 1) / kParallelGrain);
  int threads = int(std::min<int64_t>({kernel_threads(), useful, n}));
  if (threads <= 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    int64_t begin = n * t / count, end = n * (t + 1) / count;
    if (begin < end) fn(begin, end);
  }
}

// Calls fn(begin, length) on consecutive chunks of at most `chunk` indices of [0, n); threads
// take contiguous runs of chunks. The chunk boundaries depend only on n and chunk.
template <class Fn>
void parallel_chunks(int64_t n, int64_t chunk, int64_t cost, Fn&& fn) {
  parallel_for(ceil_div(n, chunk), chunk * cost, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(c * chunk, std::min(chunk, n - c * chunk));
  });
}

// parallel_for and parallel_chunks whose ranges run in in_fastest_build (core/fastest_build.h):
// each range's loop compiled for the kernels' -march and for x86-64-v4, for the element loops that
// gain from 512-bit vectors. fn is copied into the build (in_fastest_build's rule), so a loop
// should capture its scalars by value.
template <class Fn>
void parallel_for_fastest(int64_t n, int64_t cost, const Fn& fn) {
  parallel_for(n, cost, [&fn](int64_t begin, int64_t end) {
    in_fastest_build([fn, begin, end] { fn(begin, end); });
  });
}
template <class Fn>
void parallel_chunks_fastest(int64_t n, int64_t chunk, int64_t cost, const Fn& fn) {
  parallel_for_fastest(ceil_div(n, chunk), chunk * cost, [fn, n, chunk](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(c * chunk, std::min(chunk, n - c * chunk));
  });
}

}  // namespace h2::cpu
