// `h2 generate CHECKPOINT [--prompt TEXT | --ids I,J,...] [--tokens N] [--temperature T] [--seed
// S]`: samples from a trained model, streaming each token as it is drawn, so a person sees what the
// model learned. Byte-level models (vocab 256) take and print text; other vocabularies take the
// prompt as ids and print text through the tokenizer.json beside the checkpoints (h2 import keeps
// it; --tokenizer names another) or, without one, the ids. Stops at model.eos_token_id.
// Recomputes the whole context for each token (no KV cache): fine for the small models trained on
// one machine.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "backends/registry.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/tensor_host.h"
#include "models/llama.h"
#include "train/checkpoint/hf_tokenizer.h"
#include "train/data/tokenizer.h"
#include "train/model_loading.h"

namespace h2::cli {
namespace {

struct GenerateOptions {
  std::string checkpoint;
  std::string prompt = "\n";
  std::vector<int64_t> ids;  // the prompt as token ids (--ids 1,2,3)
  std::string tokenizer;     // a tokenizer.json for other vocabularies
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
  const config::TrainConfig saved = train::checkpoint_config(dir);
  const config::ModelConfig& m = saved.model;
  const bool bytes = train::model_of_bytes(saved, dir);  // as h2 export decides
  std::string tokenizer_file = o.tokenizer;
  const std::string imported = checkpoint::kept_tokenizer_dir(dir) + "/tokenizer.json";
  if (tokenizer_file.empty() && !bytes && std::filesystem::exists(imported))
    tokenizer_file = imported;
  const std::optional<checkpoint::TokenDecoder> decoder =
      tokenizer_file.empty() ? std::nullopt
                             : std::optional<checkpoint::TokenDecoder>(tokenizer_file);
  if (!bytes && o.ids.empty())
    H2_THROW(ConfigError,
             "{}: not a model of bytes (imported, or trained on token ids: data.format {}): give "
             "the prompt as --ids (ids of this model's tokenizer)",
             dir, data::data_format_name(saved.data.format));
  auto runtime = create_runtime();
  Device& device = runtime->device(o.device);
  train::LoadedModel loaded = train::load_trained_model(dir, device, DType::f32);
  models::Llama& model = *loaded.model;
  data::ByteTokenizer byte_tokenizer;
  for (int64_t id : o.ids)
    if (id < 0 || id >= m.vocab_size)
      H2_THROW(ConfigError, "--ids: token {} is outside the vocabulary [0, {}) of {}", id,
               m.vocab_size, dir);
  std::vector<int32_t> context(o.ids.begin(), o.ids.end());
  if (context.empty()) context = byte_tokenizer.encode(o.prompt.empty() ? "\n" : o.prompt);
  // Text where it can be had: bytes, or a tokenizer's pieces; else the ids themselves. A model of
  // bytes may have spare ids past the 256 bytes (vocab_size 320): they show as "<id>".
  auto show = [&](int32_t id) {
    if (decoder) return decoder->decode(id);
    if (bytes && id < data::ByteTokenizer::kVocabSize)
      return std::string(1, char(byte_tokenizer.decode_token(id)));
    if (bytes) return fmt::format("<{}>", id);
    return fmt::format("{} ", id);
  };
  for (int32_t id : context) fmt::print("{}", show(id));
  std::mt19937_64 rng(o.seed);
  for (int64_t i = 0; i < o.tokens; ++i) {
    int64_t t = std::min<int64_t>(int64_t(context.size()), m.seq_len);
    std::vector<int64_t> window(context.end() - t, context.end());
    Tensor ids = tensor_from_ints(window, {t}, DType::i32, device);
    Tensor logits = model.forward_logits(ids, 1, t);
    int32_t next = sample(tensor_to_floats(logits.select(0, t - 1)), o.temperature, rng);
    context.push_back(next);
    if (next == m.eos_token_id) break;
    fmt::print("{}", show(next));
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
  app->add_option("--prompt", options->prompt, "text the sample continues (byte-level models)")
      ->capture_default_str();
  app->add_option("--ids", options->ids,
                  "the prompt as comma-separated token ids (any vocabulary), instead of --prompt")
      ->delimiter(',')
      ->check(non_empty_ids());
  app->add_option("--tokenizer", options->tokenizer,
                  "tokenizer.json that turns the ids into text (default: the one h2 import kept "
                  "beside the checkpoints)")
      ->check(CLI::ExistingFile);
  app->add_option("--tokens", options->tokens, "tokens to generate (fewer at model.eos_token_id)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--temperature", options->temperature, "softmax temperature; 0 is greedy")
      ->capture_default_str()
      ->check(finite_at_least(0));
  app->add_option("--seed", options->seed, "sampling seed")->capture_default_str();
  app->add_option("--device", options->device, "cpu, vchip:N, vchip:NAME or cuda:N")
      ->capture_default_str();
  return {app, [options] { return run_generate(*options); }};
}

}  // namespace h2::cli
