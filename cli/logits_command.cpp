// `h2 logits CHECKPOINT_OR_HF_DIR --ids 1,2,3 --out FILE.npy`: the model's logits for one
// sequence of token ids, computed by H2 in f32 on the CPU and saved as a float32 NumPy array of
// shape (T, V), so anyone can compare H2 with another implementation of the same weights
// (tests/python/ does, against NumPy and transformers). Reads an H2 checkpoint, a run's folder
// or a Hugging Face model folder.
#include <fmt/format.h>

#include <cstdint>
#include <fstream>

#include "backends/registry.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/tensor_host.h"
#include "train/checkpoint/hf_format.h"
#include "train/model_loading.h"

namespace h2::cli {
namespace {

struct LogitsOptions {
  std::string model;
  std::vector<int64_t> ids;
  std::string out;
};

// A row-major float32 array in NumPy's .npy format (version 1.0; header padded to 64 bytes).
void write_npy(const std::string& path, const std::vector<float>& values, int64_t rows,
               int64_t cols) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  const uint16_t length = uint16_t(header.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(length & 0xff)).put(char(length >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * 4));
  if (!out.flush()) H2_THROW(Error, "cannot write '{}'", path);
}

int run_logits(const LogitsOptions& o) {
  auto runtime = create_runtime();
  Device& cpu = runtime->device("cpu");
  train::LoadedModel loaded = checkpoint::is_hf_model_dir(o.model)
                                  ? train::load_hf_model(o.model, cpu, DType::f32)
                                  : train::load_trained_model(o.model, cpu, DType::f32);
  const int64_t T = int64_t(o.ids.size()), V = loaded.config.vocab_size;
  if (T == 0) H2_THROW(ConfigError, "--ids is empty; give at least one token id");
  if (T > loaded.config.seq_len)
    H2_THROW(ConfigError, "--ids has {} tokens; {} allows at most {} (seq_len)", T, loaded.source,
             loaded.config.seq_len);
  for (int64_t id : o.ids)
    if (id < 0 || id >= V)
      H2_THROW(ConfigError, "--ids: token {} is outside the vocabulary [0, {}) of {}", id, V,
               loaded.source);
  Tensor ids = tensor_from_ints(o.ids, {T}, DType::i32, cpu);
  std::vector<float> logits = tensor_to_floats(loaded.model->forward_logits(ids, 1, T));
  write_npy(o.out, logits, T, V);
  fmt::print("wrote {}: logits ({}, {}) float32 of {}\n", o.out, T, V, loaded.source);
  return 0;
}

}  // namespace

Command make_logits_command(CLI::App& parent) {
  auto options = std::make_shared<LogitsOptions>();
  CLI::App* app = parent.add_subcommand(
      "logits", "Save a model's logits for given token ids as a .npy file (f32, cpu)");
  app->add_option("model", options->model,
                  "checkpoint folder, a run's checkpoint.dir (newest is used) or a Hugging Face "
                  "model folder (config.json)")
      ->required();
  app->add_option("--ids", options->ids, "token ids, comma-separated (at most model.seq_len)")
      ->delimiter(',')
      ->check(non_empty_ids())
      ->required();
  app->add_option("--out", options->out, "output .npy file: float32 array of shape (T, V)")
      ->required();
  return {app, [options] { return run_logits(*options); }};
}

}  // namespace h2::cli
