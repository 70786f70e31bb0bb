// `h2 export CHECKPOINT --format hf --out DIR [--dtype f32|bf16] [--shard-size BYTES] [--force]`:
// writes a trained checkpoint (or a run's newest) as a Hugging Face LlamaForCausalLM folder that
// transformers loads with from_pretrained (train/checkpoint/hf_format.h). The FP32 master weights
// are copied as they are (f32) or rounded to nearest even (bf16); nothing else changes. The folder
// also gets generation_config.json and a tokenizer (hf_tokenizer.h).
#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <map>

#include "cli/command.h"
#include "core/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/hf_format.h"
#include "train/checkpoint/hf_tokenizer.h"
#include "train/model_loading.h"

namespace h2::cli {
namespace {

struct ExportOptions {
  std::string checkpoint;
  std::string format = "hf";
  std::string out;
  std::string dtype = "f32";
  std::string shard_size = "5G";
  bool force = false;
};

// "123", "500K", "5G", "2GiB": K, M, G are powers of 1000 (as transformers counts "5GB"), Ki, Mi,
// Gi powers of 1024; a trailing B is allowed.
int64_t parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string suffix = text.substr(digits);
  if (suffix.ends_with('B') || suffix.ends_with('b')) suffix.pop_back();
  if (!suffix.empty()) suffix[0] = char(std::toupper(static_cast<unsigned char>(suffix[0])));
  const std::map<std::string, int64_t> units{
      {"", 1},         {"K", 1000},     {"M", 1000'000},         {"G", 1000'000'000},
      {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", int64_t(1) << 30}};
  auto unit = units.find(suffix);
  int64_t count = digits > 0 && digits <= 18 ? std::stoll(text.substr(0, digits)) : 0;
  if (unit == units.end() || count <= 0 || count > INT64_MAX / unit->second)
    H2_THROW(ConfigError,
             "--shard-size '{}' is not a positive byte count (examples: 1000000, 500M, 5G, 2GiB)",
             text);
  return count * unit->second;
}

void check_output_dir(const std::string& out, bool force) {
  namespace fs = std::filesystem;
  if (fs::exists(out) && !fs::is_directory(out))
    H2_THROW(ConfigError, "--out '{}' exists and is not a folder", out);
  if (fs::exists(out) && !fs::is_empty(out) && !force)
    H2_THROW(ConfigError, "--out '{}' exists and is not empty (add --force to replace its model)",
             out);
}

int run_export(const ExportOptions& o) {
  DType dtype = o.dtype == "bf16" ? DType::bf16 : DType::f32;
  int64_t shard_bytes = parse_byte_size(o.shard_size);
  std::string dir = train::resolve_checkpoint_dir(o.checkpoint);
  check_output_dir(o.out, o.force);
  const config::TrainConfig saved = train::checkpoint_config(dir);
  const config::ModelConfig& model = saved.model;
  checkpoint::TensorMap tensors = checkpoint::read_model_tensors(dir);
  // The tokenizer: an imported model's own files (kept beside its checkpoints by h2 import), else
  // the byte-level one when the model was trained on bytes; else none (the ids are the data's).
  const std::string imported = checkpoint::kept_tokenizer_dir(dir);
  const bool has_imported = std::filesystem::exists(imported);
  const bool bytes = train::model_of_bytes(saved, dir);
  checkpoint::write_hf_model(o.out, model, tensors,
                             {.dtype = dtype,
                              .max_shard_bytes = shard_bytes,
                              .source = dir,
                              .tokenizer_dir = has_imported ? imported : std::string(),
                              .byte_level_tokenizer = bytes});
  int64_t params = 0;
  for (const auto& [name, t] : tensors) params += t.shape.numel();
  fmt::print(
      "exported {} ({} tensors, {} parameters) to {} as Hugging Face LlamaForCausalLM ({}); "
      "tokenizer: {}\n",
      dir, tensors.size(), params, o.out, o.dtype,
      has_imported && !std::filesystem::is_empty(imported)
          ? "the imported model's (" + imported + ")"
      : has_imported ? std::string("none (the imported model came without one: add its files)")
      : bytes        ? std::string("byte-level (token id = byte)")
              : std::string("none (trained on pre-tokenized data: add its tokenizer files)"));
  return 0;
}

}  // namespace

Command make_export_command(CLI::App& parent) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* app = parent.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face model folder (config.json + safetensors)");
  app->add_option("checkpoint", options->checkpoint,
                  "checkpoint folder (step_NNNNNN) or a run's checkpoint.dir (newest is used)")
      ->required();
  app->add_option("--format", options->format, "output format (hf: Hugging Face LlamaForCausalLM)")
      ->check(CLI::IsMember({"hf"}))
      ->capture_default_str();
  app->add_option("--out", options->out, "output folder")->required();
  app->add_option("--dtype", options->dtype,
                  "weight dtype: f32 (exact master weights) or bf16 (round to nearest even)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app->add_option("--shard-size", options->shard_size,
                  "largest safetensors file before the weights are split into "
                  "model-0000K-of-0000N files with an index (K, M, G = 10^3, 10^6, 10^9; Ki, Mi, "
                  "Gi = 2^10, 2^20, 2^30)")
      ->capture_default_str();
  app->add_flag("--force", options->force,
                "write into a non-empty --out (earlier config.json and model*.safetensors there "
                "are replaced)");
  return {app, [options] { return run_export(*options); }};
}

}  // namespace h2::cli
