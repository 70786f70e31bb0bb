// Multi-process training runs for tests (see training_runs.h).
#include "training_runs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "comm/world/world.h"
#include "multiproc.h"
#include "train/checkpoint/checkpoint.h"
#include "train/data/default_data.h"
#include "train/trainer.h"

namespace h2::train::testing {

namespace fs = std::filesystem;
using comm::testing::RankContext;
using comm::testing::run_ranks;

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

config::TrainConfig small_config(const fs::path& dir, int layers) {
  config::TrainConfig cfg = config::parse_yaml(R"(
model: {vocab_size: 256, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, ffn_dim: 64, seq_len: 32}
train: {batch_size: 4, steps: 20, lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 3, eval_every: 10, eval_batches: 3, seed: 11}
log: {every: 1}
parallel: {bucket_mb: 0.01}
)",
                                               "test");
  cfg.model.n_layers = layers;
  cfg.data.path = data::default_text_path(dir.string());
  return cfg;
}

void train_on_ranks(const config::TrainConfig& cfg, int ranks) {
  // One thread per rank whatever the rank count, so that a run on n ranks and its one-process
  // reference compute alike: a GEMM library's blocking, and so the order of its sums, may follow
  // its thread count (1.9e-5 relative after 5 steps between 1 and 2 threads, pp2_gpipe).
  comm::testing::RunOptions options;
  options.env = {{"H2_NUM_THREADS", "1"}};
  const auto outcomes = run_ranks(
      ranks,
      [&](RankContext& ctx) {
        std::unique_ptr<comm::Communicator> alone =
            ranks > 1 ? nullptr : comm::loopback_communicator();
        Trainer trainer(
            cfg, ctx.runtime, [](const std::string&) {}, ranks > 1 ? ctx.comm() : *alone);
        trainer.run();
      },
      options);
  comm::testing::expect_all_ok(outcomes);
}

std::string newest_checkpoint(const std::string& dir) {
  const std::optional<std::string> newest = checkpoint::latest_checkpoint(dir);
  if (!newest) throw std::runtime_error("no checkpoint in '" + dir + "' (did the run fail?)");
  return *newest;
}

Curve read_metrics(const fs::path& path) {
  Curve curve;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") != "step") continue;
    curve.loss[j["step"]] = j["loss"];
    if (j.contains("eval_loss")) curve.eval_loss[j["step"]] = j["eval_loss"];
  }
  return curve;
}

void expect_close(const std::map<int64_t, double>& got, const std::map<int64_t, double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [step, w] : want) {
    ASSERT_TRUE(got.contains(step)) << what << " step " << step;
    EXPECT_LE(std::abs(got.at(step) - w), 1e-5 * std::abs(w))
        << what << " at step " << step << ": " << got.at(step) << " vs " << w;
  }
}

double max_relative_difference(const std::string& a_dir, const std::string& b_dir,
                               checkpoint::Section section) {
  auto read = [section](const std::string& dir) {
    checkpoint::CheckpointReader reader(dir);
    checkpoint::TensorMap tensors;
    for (const auto& [name, entry] : reader.manifest().tensors(section))
      tensors[name] = reader.read(section, name);
    return tensors;
  };
  auto a = read(a_dir), b = read(b_dir);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, t] : b) {
    if (!a.contains(name)) {
      ADD_FAILURE() << "no " << name << " in " << a_dir;
      continue;
    }
    const auto& u = a.at(name);
    EXPECT_EQ(u.shape, t.shape) << name;
    const float* x = reinterpret_cast<const float*>(u.bytes.data());
    const float* y = reinterpret_cast<const float*>(t.bytes.data());
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < t.shape.numel(); ++i) {
      diff = std::max(diff, std::abs(double(x[i]) - y[i]));
      scale = std::max(scale, std::abs(double(y[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace h2::train::testing
