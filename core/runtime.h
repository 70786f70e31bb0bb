// The Runtime owns every registered backend and the dispatch policy (fallback and autocompare
// lists). One per process, created explicitly by main() or a test (backends/registry.h has the
// factory): there is no global state. Devices keep a pointer back to it and must not outlive it.
#pragma once

#include <bitset>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/op_catalogue.h"

namespace h2 {

struct DispatchPolicy {
  std::bitset<kOpCount> fallback;  // by Op: run on the CPU with copies
  std::bitset<kOpCount> check;     // by Op: shadow-run on the CPU and compare
  double check_rtol = 0;           // 0: the dtype's default tolerance

  // From H2_FALLBACK_OPS, H2_CHECK_OPS and H2_CHECK_RTOL; throws ConfigError on unknown op names.
  static DispatchPolicy from_env();
  bool falls_back(Op op) const { return fallback[size_t(op)]; }
  bool checks(Op op) const { return check[size_t(op)]; }
};

class Runtime {
 public:
  Runtime(std::vector<std::unique_ptr<Backend>> backends, DispatchPolicy policy);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // "cpu", "cpu:0", "vchip:1", "vchip:chip-a" (first device of that chip type), "cuda:0".
  // Throws ConfigError naming the spec and the devices that exist.
  Device& device(std::string_view spec);
  // The host CPU device: fallback target and reference for autocompare. Always present.
  Device& cpu() { return *cpu_; }
  std::vector<Device*> devices();
  // nullptr when no backend of that name is registered.
  Backend* backend(std::string_view name);
  const DispatchPolicy& policy() const { return policy_; }
  DispatchPolicy& policy() { return policy_; }
  // True the first time `key` is seen by this runtime (warn once per op and device). Thread-safe.
  bool first_time(const std::string& key);

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  DispatchPolicy policy_;
  Device* cpu_ = nullptr;
  std::mutex seen_mutex_;
  std::set<std::string> seen_;
};

}  // namespace h2
