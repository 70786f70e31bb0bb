// Fuzzes the training config loader, what `h2 train CONFIG --set KEY=VALUE ...` runs
// (train/config/config.h): parse_yaml of the YAML text, apply_override of each --set, validate
// (without the data file check), then the plan the config describes for jobs of 1, 2 and 4 ranks
// (train/config/job_plan.h: plan_from_config).
// Input: the YAML document, then optionally NUL-separated --set assignments
// ("YAML\0train.lr=1e-3\0model.dim=64").
// Findings: a crash, a sanitizer report, an exception other than h2::Error (fuzz/fuzz_common.h),
// or a validated config whose dump_yaml does not parse back to an equal config (config.h promises
// that round trip; `h2 train --print-config` relies on it).
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_common.h"
#include "train/config/config.h"
#include "train/config/job_plan.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  const std::vector<std::string_view> parts = fuzz::split_nul(fuzz::text(data, size));
  config::TrainConfig cfg;
  try {
    cfg = config::parse_yaml(parts[0], "fuzz.yaml");
    for (size_t i = 1; i < parts.size(); ++i) config::apply_override(cfg, parts[i]);
    config::validate(cfg, {.check_files = false});
  } catch (const Error& e) {
    return fuzz::refused(e);
  }

  // The dump reads back to the same config (what --print-config promises).
  const std::string dumped = config::dump_yaml(cfg);
  config::TrainConfig back;
  try {
    back = config::parse_yaml(dumped, "dump_yaml");
  } catch (const Error& e) {
    H2_FUZZ_EXPECT(false, std::string("the dump does not parse: ") + e.what() + "\n" + dumped);
  }
  H2_FUZZ_EXPECT(back == cfg, "the dump parses to another config:\n" + dumped +
                                  "\nreads back as\n" + config::dump_yaml(back));
  (void)config::dump_json(cfg);

  try {
    (void)config::precision_policy(cfg);
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  for (int world_size : {1, 2, 4}) {
    try {
      const parallel::Plan plan = config::plan_from_config(cfg, world_size);
      (void)plan.str();
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
