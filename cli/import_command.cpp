// `h2 import HF_DIR --out CHECKPOINT_DIR [--config-out CONFIG.yaml] [--force]`: turns a Hugging
// Face LlamaForCausalLM folder (config.json + safetensors, one file or sharded) into an H2
// checkpoint CHECKPOINT_DIR/step_000000 holding the weights as FP32 masters and no optimizer
// state, so training starts from them with fresh moments. --config-out writes a training config
// whose model section matches, pointing checkpoint.dir at CHECKPOINT_DIR with resume on.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli/command.h"
#include "core/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/hf_format.h"
#include "train/checkpoint/hf_tokenizer.h"
#include "train/checkpoint/step_folders.h"
#include "train/config/config.h"
#include "train/data/default_data.h"

namespace h2::cli {
namespace {
namespace fs = std::filesystem;

struct ImportOptions {
  std::string hf_dir;
  std::string out;
  std::string config_out;
  bool force = false;
};

// Refuses a non-empty --out without --force; with it, removes the checkpoints already there (the
// newest would otherwise shadow the imported step_000000).
void prepare_output_dir(const std::string& out, bool force) {
  if (fs::exists(out) && !fs::is_directory(out))
    H2_THROW(ConfigError, "--out '{}' exists and is not a folder", out);
  if (!fs::exists(out) || fs::is_empty(out)) return;
  if (!force)
    H2_THROW(ConfigError,
             "--out '{}' exists and is not empty (add --force to replace its checkpoints)", out);
  for (const auto& entry : fs::directory_iterator(out)) {
    // H2's step folders only (step_of_folder): a "step_notes" of the user's stays.
    std::string name = entry.path().filename().string();
    if (entry.is_directory() &&
        (checkpoint::step_of_folder(name) || checkpoint::step_of_tmp_folder(name)))
      fs::remove_all(entry.path());
  }
}

int run_import(const ImportOptions& o) {
  checkpoint::HfModel hf = checkpoint::read_hf_model(o.hf_dir);
  if (!o.config_out.empty() && fs::exists(o.config_out) && !o.force)
    H2_THROW(ConfigError, "--config-out '{}' exists (add --force to overwrite it)", o.config_out);
  prepare_output_dir(o.out, o.force);

  config::TrainConfig cfg;
  cfg.model = hf.config.model;
  cfg.checkpoint.dir = o.out;
  cfg.checkpoint.resume = true;  // `h2 train` starts from the imported weights
  // A config that runs as it is: the default text as bytes stands in for real data (the header
  // says how to point it at tokens), a short fine-tuning schedule.
  cfg.data.path = data::default_text_path(fs::temp_directory_path());
  cfg.data.format = config::DataFormat::text;
  cfg.train.steps = 100;
  cfg.train.batch_size = 4;
  cfg.train.warmup_steps = 10;
  cfg.train.eval_every = 50;
  cfg.train.lr = 3e-5;  // fine-tuning pretrained weights: far below the from-scratch default
  cfg.train.min_lr = 3e-6;
  const std::string yaml = config::dump_yaml(cfg);
  std::string written = checkpoint::save_checkpoint(o.out, {0, 0, yaml}, hf.tensors,
                                                    /*optimizer=*/{}, /*keep_last=*/0);
  // The source's tokenizer goes beside the checkpoints, for h2 export to carry on.
  // The folder is made even when there are none: it marks the model as imported, so that
  // export and generate never take its ids for bytes (hf_tokenizer.h).
  const std::string tokenizer = checkpoint::run_tokenizer_dir(o.out);
  fs::remove_all(tokenizer);
  fs::create_directories(tokenizer);
  if (checkpoint::copy_tokenizer_files(o.hf_dir, tokenizer) > 0)
    fmt::print("tokenizer files: {}\n", tokenizer);
  else
    fmt::print("tokenizer files: none in {} (h2 export will write none either)\n", o.hf_dir);
  int64_t params = 0;
  for (const auto& [name, t] : hf.tensors) params += t.shape.numel();
  fmt::print("imported {} ({} tensors, {} parameters, {}) to {}\n", o.hf_dir, hf.tensors.size(),
             params, dtype_name(hf.config.dtype), written);

  if (!o.config_out.empty()) {
    std::ofstream file(o.config_out, std::ios::trunc);
    file << fmt::format(
                "# Written by `h2 import {}`: the model section matches that model and training\n"
                "# resumes from its weights in {} (fresh optimizer state). It runs as it is on a\n"
                "# placeholder text read as bytes; for real data tokenized with this model's\n"
                "# tokenizer set data.path and data.format (bin: llm.c files, uint16: nanoGPT).\n",
                o.hf_dir, o.out)
         << yaml;
    if (!file.flush()) H2_THROW(Error, "cannot write --config-out '{}'", o.config_out);
    fmt::print("config: {}\n", o.config_out);
  }
  return 0;
}

}  // namespace

Command make_import_command(CLI::App& parent) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* app = parent.add_subcommand(
      "import", "Make an H2 checkpoint from a Hugging Face Llama model folder");
  app->add_option("hf_dir", options->hf_dir,
                  "Hugging Face LlamaForCausalLM folder: config.json and model.safetensors (or "
                  "sharded files with model.safetensors.index.json)")
      ->required();
  app->add_option("--out", options->out,
                  "checkpoint folder to create (the run's checkpoint.dir); the weights go to "
                  "OUT/step_000000")
      ->required();
  app->add_option("--config-out", options->config_out,
                  "also write a training config (YAML) for this model that resumes from OUT");
  app->add_flag("--force", options->force,
                "use a non-empty --out (its step_* checkpoints are removed) and overwrite "
                "--config-out");
  return {app, [options] { return run_import(*options); }};
}

}  // namespace h2::cli
