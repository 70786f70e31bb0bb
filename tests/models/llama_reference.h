// A double-precision Llama forward composed from the reference ops of tests/ops/reference.h,
// independent of the model code: it takes the parameters by Hugging Face name, so it also checks
// that names and layouts mean what they say. Plus the shared test fixtures (runtime, batches).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/runtime.h"
#include "models/llama.h"
#include "tests/ops/reference.h"

namespace h2::test {

using ParamMap = std::map<std::string, ref::Vec>;

// Mean cross-entropy over non-ignored targets (-100) of ids/targets (B*T), in double.
double reference_loss(const models::LlamaConfig& cfg, const ParamMap& params, const ref::Ids& ids,
                      const ref::Ids& targets, int64_t B, int64_t T);

// The small model both model test files use: V=11, C=16, L=2, H=4, Hkv=2, F=24, max T=8.
models::LlamaConfig tiny_llama_config(bool tie_embeddings = false);

// One Runtime per test process, virtual chips unpaced (vchip_time_scale = 0).
Runtime& model_runtime();

// The model's parameters as doubles, by name.
ParamMap params_as_double(models::Llama& model);

}  // namespace h2::test
