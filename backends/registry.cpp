// The backend list (see registry.h).
#include "backends/registry.h"

#include "backends/vchip/vchip_backend.h"
#include "core/env.h"
#include "core/log.h"
#if H2_HAVE_CUDA_BACKEND
#include "backends/cuda/cuda_backend.h"
#endif

namespace h2 {

RuntimeOptions RuntimeOptions::from_env() {
  RuntimeOptions options;
  options.cpu = cpu::CpuOptions::from_env();
  std::string chip_file = env_string("H2_VCHIP_CONFIG");
  options.chips =
      chip_file.empty() ? vchip::builtin_chip_specs() : vchip::load_chip_specs(chip_file);
  options.vchip_time_scale = env_double("H2_VCHIP_TIME_SCALE", 0, 1e6);
  return options;
}

std::unique_ptr<Runtime> create_runtime(const RuntimeOptions& options) {
  set_log_level(env_string("H2_LOG_LEVEL"));
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(std::make_unique<cpu::CpuBackend>(options.cpu));
  backends.push_back(
      std::make_unique<vchip::VchipBackend>(options.chips, options.vchip_time_scale));
#if H2_HAVE_CUDA_BACKEND
  backends.push_back(std::make_unique<cuda::CudaBackend>());
#endif
  return std::make_unique<Runtime>(std::move(backends), DispatchPolicy::from_env());
}

}  // namespace h2
