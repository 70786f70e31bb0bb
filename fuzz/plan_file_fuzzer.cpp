// Fuzzes HeteroPP plan files (parallel.plan, configs/plans/*.yaml; train/config/plan.h), as
// `h2 train` reads them: parse_plan of the text, then apply_plan to the default config (the model
// as deep as the stages reach) for jobs of the plan's own size (highest rank + 1, times its
// replicas) and of 1, 2 and 4 ranks, validate, plan_from_config, and, for small plans, the lowered
// schedule the runtime would execute.
// Input: the plan file's YAML text.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h).
#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/config/config.h"
#include "train/config/job_plan.h"
#include "train/config/plan.h"

namespace {

// The model depth the plan's stages cover (1 to 1024; 4 otherwise), so that plans of any depth
// get past the layer check.
int64_t plan_layers(const h2::config::Plan& plan) {
  const int64_t last = plan.stages.empty() ? 3 : plan.stages.back().last_layer;
  return last >= 0 && last < 1024 ? last + 1 : 4;
}

// The job the plan describes, as a small number (computed without trusting any value).
int plan_world_size(const h2::config::Plan& plan) {
  int64_t ranks = 1;
  for (const h2::config::PlanStage& stage : plan.stages)
    for (int r : stage.ranks) ranks = std::max<int64_t>(ranks, int64_t(r) + 1);
  int64_t replicas = 1;
  for (const h2::config::PlanSetting& s : plan.settings)
    if (s.key == "parallel.replicas")
      replicas = std::clamp<int64_t>(std::atoll(s.value.c_str()), 1, 64);
  return int(std::clamp<int64_t>(ranks * replicas, 1, 256));
}

}  // namespace

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  config::Plan file;
  try {
    file = config::parse_plan(std::string(fuzz::text(data, size)), "fuzz-plan.yaml");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  for (int world_size : std::set<int>{plan_world_size(file), 1, 2, 4}) {
    try {
      config::TrainConfig cfg;  // the defaults (micro-batches of 8 rows), the plan's depth
      cfg.model.n_layers = plan_layers(file);
      cfg.parallel.plan = "fuzz-plan.yaml";
      config::apply_plan(file, cfg, world_size);
      config::validate(cfg, {.check_files = false});
      const parallel::Plan plan = config::plan_from_config(cfg, world_size);
      (void)plan.str();
      const int64_t actions = int64_t(plan.stages()) * plan.micro_batches;
      if (actions <= 4096) (void)plan.lowered_schedule();  // bounded: the size is the user's
    } catch (const Error& e) {
      fuzz::refused(e);
    }
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
