// Multi-process training runs for tests: a small config on Debian's default text, training on N
// forked ranks (tests/comm/collectives/multiproc.h), metrics files read back as loss curves, and
// checkpoints compared tensor by tensor. Every training runs in a forked child (a process that
// used OpenMP must not fork workers), so the test process itself stays single-threaded.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "train/checkpoint/manifest.h"
#include "train/config/config.h"

namespace h2::train::testing {

std::filesystem::path fresh_dir(const std::string& name);

// vocab 256, dim 32, 2 layers (or `layers`), 4 heads / 2 kv heads, seq 32, batch 4, 20 steps,
// evaluation every 10 steps, a metrics line every step; data from train/data/default_data.h.
config::TrainConfig small_config(const std::filesystem::path& dir, int layers = 2);

// Trains `cfg` on `ranks` forked ranks; ranks > 1 pass the job's communicator to the trainer
// (cfg.parallel.mode says how it is used). Fails the test with every rank's message if one fails.
void train_on_ranks(const config::TrainConfig& cfg, int ranks);

// The newest checkpoint folder in `dir`; throws (failing the test) when there is none, e.g.
// because the training run before it failed.
std::string newest_checkpoint(const std::string& dir);

struct Curve {
  std::map<int64_t, double> loss, eval_loss;
};
Curve read_metrics(const std::filesystem::path& path);

// Every step of `want` in `got`, each within 1e-5 relative.
void expect_close(const std::map<int64_t, double>& got, const std::map<int64_t, double>& want,
                  const std::string& what);

// Largest |a - b| over a tensor relative to the tensor's largest |b|, over every tensor of a
// section of two checkpoint folders (the optimizer's "m/" moments after one step are 0.1 x the
// gradients: a view of the gradients before AdamW's normalisation magnifies rounding).
double max_relative_difference(const std::string& a_dir, const std::string& b_dir,
                               checkpoint::Section section = checkpoint::Section::model);

}  // namespace h2::train::testing
