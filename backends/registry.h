// The one explicit list of backends: create_runtime() registers cpu, vchip and (when built with
// H2_WITH_CUDA and a GPU is present) cuda, in that order. No static initialisers.
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/vchip/chip_spec.h"
#include "core/runtime.h"

namespace h2 {

struct RuntimeOptions {
  cpu::CpuOptions cpu;
  std::vector<vchip::ChipSpec> chips;  // virtual chips to register
  double vchip_time_scale = 1;
  // From H2_NUM_THREADS, H2_CPU_ALLOCATOR, H2_VCHIP_CONFIG (empty: the built-in chips) and
  // H2_VCHIP_TIME_SCALE.
  static RuntimeOptions from_env();
};

// Also applies H2_LOG_LEVEL. Throws ConfigError for bad knobs or chip files.
std::unique_ptr<Runtime> create_runtime(const RuntimeOptions& options = RuntimeOptions::from_env());

}  // namespace h2
