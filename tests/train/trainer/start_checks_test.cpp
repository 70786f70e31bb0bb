// The words a run says before it trains (train/start_checks.h), from their inputs alone: a resume
// on other windows names what changed (the training tokens even where the saved config cannot be
// read), says nothing where nothing was drawn or nothing changed; the long warm-up and the job's
// fingerprint.
#include <gtest/gtest.h>

#include <string>

#include "train/checkpoint/checkpoint.h"
#include "train/config/config.h"
#include "train/start_checks.h"

namespace h2::train {
namespace {

checkpoint::TrainerState saved_state(const config::TrainConfig& cfg, uint64_t position,
                                     int64_t tokens) {
  checkpoint::TrainerState state;
  state.step = 2;
  state.sampler_position = position;
  state.config_yaml = config::dump_yaml(cfg);
  state.train_tokens = tokens;
  return state;
}

TEST(StartChecks, AResumeOnOtherWindowsNamesWhatChanged) {
  config::TrainConfig cfg;
  cfg.data.path = "a.txt";
  EXPECT_EQ(other_windows_warning(saved_state(cfg, 16, 1000), "run/step_000002", cfg, 1000), "");
  EXPECT_EQ(other_windows_warning(saved_state(cfg, 0, 1000), "run/step_000002", cfg, 500), "")
      << "nothing drawn yet (an import): no windows differ";
  config::TrainConfig now = cfg;
  now.train.seed = cfg.train.seed + 1;
  const std::string warning =
      other_windows_warning(saved_state(cfg, 16, 1000), "run/step_000002", now, 500);
  EXPECT_NE(warning.find("the run that wrote run/step_000002 drew other windows: 1000 training "
                         "tokens then, 500 now; train.seed "),
            std::string::npos)
      << warning;
  // A config this version cannot read still has its tokens compared.
  checkpoint::TrainerState unreadable = saved_state(cfg, 16, 1000);
  unreadable.config_yaml = "model: {no_such_key: 1}\n";
  EXPECT_NE(other_windows_warning(unreadable, "run/step_000002", cfg, 500)
                .find("1000 training tokens then, 500 now"),
            std::string::npos);
  EXPECT_EQ(other_windows_warning(unreadable, "run/step_000002", cfg, 1000), "");
}

TEST(StartChecks, ALongWarmupAndTheJobsFingerprint) {
  config::TrainConfig cfg;
  cfg.train.steps = 10;
  cfg.train.warmup_steps = 10;
  EXPECT_EQ(long_warmup_warning(cfg), "");
  cfg.train.warmup_steps = 20;
  EXPECT_NE(long_warmup_warning(cfg).find("never reaches train.lr"), std::string::npos);
  EXPECT_EQ(job_fingerprint(""), "");
  EXPECT_EQ(job_fingerprint("secret").size(), 16u);
  EXPECT_EQ(job_fingerprint("secret").find("secret"), std::string::npos);
  EXPECT_NE(job_fingerprint("secret"), job_fingerprint("secret2"));
}

}  // namespace
}  // namespace h2::train
