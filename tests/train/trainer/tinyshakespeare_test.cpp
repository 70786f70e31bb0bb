// The README's tiny config, trained on tinyshakespeare for 300 steps, must predict held-out text
// far better than its byte frequencies do. A model that learned only the unigram distribution
// scores the unigram entropy H of the validation bytes (about 3.34 nats); 0.75 * H (about 2.5)
// is out of reach without using context, while the tiny model reaches about 2.0, leaving half a
// nat of margin for other seeds and platforms. Skipped where ../shared/data is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "backends/registry.h"
#include "comm/world/world.h"
#include "train/data/dataset.h"
#include "train/trainer.h"

namespace h2::train {
namespace {

double unigram_entropy(std::span<const int32_t> tokens) {
  std::map<int32_t, double> counts;
  for (int32_t t : tokens) counts[t] += 1;
  double h = 0, n = double(tokens.size());
  for (const auto& [token, c] : counts) h -= c / n * std::log(c / n);
  return h;
}

TEST(TinyShakespeare, EvalLossIsWellBelowUnigramEntropy) {
  std::string data = std::string(H2_SHARED_DATA_DIR) + "/tinyshakespeare.txt";
  if (!std::filesystem::exists(data)) GTEST_SKIP() << data << " is absent";
  std::vector<std::string> overrides = {"data.path=" + data,
                                        "checkpoint.dir=", "log.metrics_file=", "train.steps=300",
                                        "train.eval_batches=16"};
  config::TrainConfig cfg =
      config::load_config(std::string(H2_SOURCE_DIR) + "/configs/train/tiny.yaml", overrides);
  auto dataset = data::TokenDataset::load(data, data::DataFormat::text);
  double entropy = unigram_entropy(dataset.split(cfg.data.val_fraction, cfg.model.seq_len).val);
  auto runtime = create_runtime();
  auto alone = comm::loopback_communicator();
  Trainer trainer(
      cfg, *runtime, [](const std::string&) {}, *alone);
  TrainSummary summary = trainer.run();
  EXPECT_LT(summary.final_eval_loss, 0.75 * entropy)
      << "eval loss " << summary.final_eval_loss << ", unigram entropy " << entropy;
}

}  // namespace
}  // namespace h2::train
