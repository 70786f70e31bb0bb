// `h2 generate CHECKPOINT [--prompt TEXT] [--tokens N] [--temperature T] [--seed S]`: samples text
// from a trained byte-level model, streaming each byte as it is drawn, so a person sees what the
// model learned. Recomputes the whole context for each token (no KV cache): fine for the small
// models trained on one machine.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "backends/registry.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/tensor_host.h"
#include "models/llama.h"
#include "train/data/tokenizer.h"
#include "train/model_loading.h"

namespace h2::cli {
namespace {

struct GenerateOptions {
  std::string checkpoint;
  std::string prompt = "\n";
  int64_t tokens = 256;
  double temperature = 0.8;
  uint64_t seed = 0;
  std::string device = "cpu";
};

// Draws an id from softmax(logits / temperature); temperature 0 takes the most likely id.
int32_t sample(const std::vector<float>& logits, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0)
    return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) weights[i] = std::exp((logits[i] - top) / temperature);
  std::discrete_distribution<int32_t> pick(weights.begin(), weights.end());
  return pick(rng);
}

int run_generate(const GenerateOptions& o) {
  const std::string dir = train::resolve_checkpoint_dir(o.checkpoint);
  const config::ModelConfig m = train::checkpoint_model_config(dir);
  if (m.vocab_size != data::ByteTokenizer::kVocabSize)
    H2_THROW(ConfigError,
             "{}: model.vocab_size is {}; h2 generate supports byte-level models "
             "(vocab 256)",
             dir, m.vocab_size);
  auto runtime = create_runtime();
  Device& device = runtime->device(o.device);
  train::LoadedModel loaded = train::load_trained_model(dir, device, DType::f32);
  models::Llama& model = *loaded.model;

  data::ByteTokenizer tokenizer;
  std::vector<int32_t> context = tokenizer.encode(o.prompt.empty() ? "\n" : o.prompt);
  std::mt19937_64 rng(o.seed);
  fmt::print("{}", o.prompt);
  for (int64_t i = 0; i < o.tokens; ++i) {
    int64_t t = std::min<int64_t>(int64_t(context.size()), m.seq_len);
    std::vector<int64_t> window(context.end() - t, context.end());
    Tensor ids = tensor_from_ints(window, {t}, DType::i32, device);
    Tensor logits = model.forward_logits(ids, 1, t);
    int32_t next = sample(tensor_to_floats(logits.select(0, t - 1)), o.temperature, rng);
    context.push_back(next);
    std::fputc(static_cast<unsigned char>(tokenizer.decode_token(next)), stdout);
    std::fflush(stdout);
  }
  fmt::print("\n");
  return 0;
}

}  // namespace

Command make_generate_command(CLI::App& parent) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* app = parent.add_subcommand("generate", "Sample text from a trained checkpoint");
  app->add_option("checkpoint", options->checkpoint,
                  "checkpoint folder (step_NNNNNN) or a run's checkpoint.dir (newest is used)")
      ->required();
  app->add_option("--prompt", options->prompt, "text the sample continues")->capture_default_str();
  app->add_option("--tokens", options->tokens, "tokens (bytes) to generate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--temperature", options->temperature, "softmax temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--seed", options->seed, "sampling seed")->capture_default_str();
  app->add_option("--device", options->device, "cpu, vchip:N, vchip:NAME or cuda:N")
      ->capture_default_str();
  return {app, [options] { return run_generate(*options); }};
}

}  // namespace h2::cli
