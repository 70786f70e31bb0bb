// Helpers shared by the benchmarks: wall-clock timing of a callable (warm-up, then N timed
// repeats), medians, seeded random tensors and raw byte read-back from any device. Every timed
// call synchronises the device's default stream, so paced or asynchronous devices are measured
// to completion.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_host.h"

namespace h2::bench {

// Seconds of each of `repeats` calls of fn, after `warmup` untimed calls.
template <class Fn>
std::vector<double> time_runs(Device& device, Fn&& fn, int warmup, int repeats) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) {
    fn();
    device.default_stream().synchronize();
  }
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    auto start = Clock::now();
    fn();
    device.default_stream().synchronize();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return seconds;
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

inline double minimum(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

// Uniform values in [-scale, scale), rounded to `dtype`, from a fixed seed (reproducible runs).
inline Tensor random_tensor(const Shape& shape, DType dtype, Device& device, uint32_t seed,
                            float scale = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(size_t(shape.numel()));
  for (float& v : values) v = dist(rng);
  return tensor_from_floats(values, shape, dtype, device);
}

// The tensor's bytes as stored (contiguous tensors only), copied to host memory.
inline std::vector<std::byte> raw_bytes(const Tensor& tensor) {
  std::vector<std::byte> bytes(size_t(tensor.nbytes()));
  tensor.device().copy_bytes(bytes.data(), false, tensor.data(), true, bytes.size(),
                             tensor.device().default_stream());
  tensor.device().default_stream().synchronize();
  return bytes;
}

// "unset" or the variable's value, for the report header.
inline std::string env_or_unset(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string("'") + value + "'" : "unset";
}

}  // namespace h2::bench
