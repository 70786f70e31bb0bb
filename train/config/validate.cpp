// Cross-field checks of a TrainConfig (single-key ranges are checked as each value is set, in
// keys.cpp). Each message names every key involved, its value and where the value came from.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include "core/error.h"
#include "train/config/config.h"

namespace h2::config {
namespace {

// "model.dim = 100 (cfg.yaml:3)"
std::string show(const TrainConfig& c, std::string_view key, const auto& value) {
  return fmt::format("{} = {} ({})", key, value, c.origin_of(key));
}

bool numeric(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool valid_device(std::string_view spec) {
  size_t colon = spec.find(':');
  std::string_view kind = spec.substr(0, colon);
  if (colon == std::string_view::npos) return kind == "cpu" || kind == "cuda";
  std::string_view rest = spec.substr(colon + 1);
  if (kind == "cpu" || kind == "cuda") return numeric(rest);
  return kind == "vchip" && !rest.empty();
}

void check_model(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  if (m.dim % m.n_heads != 0)
    H2_THROW(ConfigError, "{} is not divisible by {}", show(c, "model.dim", m.dim),
             show(c, "model.n_heads", m.n_heads));
  if (m.n_heads % m.n_kv_heads != 0)
    H2_THROW(ConfigError, "{} is not divisible by {} (grouped-query attention)",
             show(c, "model.n_heads", m.n_heads), show(c, "model.n_kv_heads", m.n_kv_heads));
  if ((m.dim / m.n_heads) % 2 != 0)
    H2_THROW(ConfigError,
             "head dim = model.dim / model.n_heads = {} / {} = {} is odd; rotary embedding needs "
             "an even head dim (model.dim from {}, model.n_heads from {})",
             m.dim, m.n_heads, m.dim / m.n_heads, c.origin_of("model.dim"),
             c.origin_of("model.n_heads"));
  if (c.data.format == DataFormat::text && m.vocab_size < 256)
    H2_THROW(ConfigError, "{} is smaller than 256, the byte-level tokenizer's vocabulary ({})",
             show(c, "model.vocab_size", m.vocab_size), show(c, "data.format", "text"));
  if (m.rope_scaling_factor > 0 && !(m.rope_high_freq_factor > m.rope_low_freq_factor))
    H2_THROW(ConfigError, "{} must be above {} (Llama 3 RoPE scaling)",
             show(c, "model.rope_high_freq_factor", m.rope_high_freq_factor),
             show(c, "model.rope_low_freq_factor", m.rope_low_freq_factor));
  for (const auto& [key, id] : {std::pair{"model.bos_token_id", m.bos_token_id},
                                {"model.eos_token_id", m.eos_token_id},
                                {"model.pad_token_id", m.pad_token_id}})
    if (id >= m.vocab_size)
      H2_THROW(ConfigError, "{} is outside the vocabulary ({})", show(c, key, id),
               show(c, "model.vocab_size", m.vocab_size));
}

void check_train(const TrainConfig& c) {
  const TrainOptions& t = c.train;
  if (t.min_lr > t.lr)
    H2_THROW(ConfigError, "{} is larger than {}", show(c, "train.min_lr", t.min_lr),
             show(c, "train.lr", t.lr));
  if (!valid_device(t.device))
    H2_THROW(ConfigError, "{} is not a device: expected cpu, cuda, cuda:N, vchip:N or vchip:NAME",
             show(c, "train.device", fmt::format("'{}'", t.device)));
  if (t.eval_every > 0 && c.data.val_fraction == 0 && c.data.val_path.empty())
    H2_THROW(ConfigError,
             "{} asks for evaluation but {} holds nothing out (set it > 0, or set "
             "train.eval_every = 0)",
             show(c, "train.eval_every", t.eval_every),
             show(c, "data.val_fraction", c.data.val_fraction));
}

// Tokens of one micro-batch: the trainer sizes its batch buffers with this product in int64 and
// the sampler adds one to seq_len, before the memory check (which estimates in double) has a say.
// Bounded far above any machine: batch_size 2^60 wrapped the buffers to 0 tokens and training
// wrote past them.
constexpr double kMaxMicroBatchTokens = 0x1p40;

void check_sizes(const TrainConfig& c) {
  const double tokens = double(c.train.batch_size) * double(c.model.seq_len);
  if (tokens > kMaxMicroBatchTokens)
    H2_THROW(ConfigError, "{} x {} = {:.3g} tokens a micro-batch, beyond 2^40",
             show(c, "train.batch_size", c.train.batch_size),
             show(c, "model.seq_len", c.model.seq_len), tokens);
}

void check_checkpoint(const TrainConfig& c) {
  const CheckpointConfig& k = c.checkpoint;
  if (!k.dir.empty()) return;
  if (k.resume)
    H2_THROW(ConfigError, "{} needs checkpoint.dir, which is empty ({})",
             show(c, "checkpoint.resume", "true"), c.origin_of("checkpoint.dir"));
  if (k.every > 0)
    H2_THROW(ConfigError, "{} needs checkpoint.dir, which is empty ({})",
             show(c, "checkpoint.every", k.every), c.origin_of("checkpoint.dir"));
  if (k.async)
    H2_THROW(ConfigError, "{} needs checkpoint.dir, which is empty ({})",
             show(c, "checkpoint.async", "true"), c.origin_of("checkpoint.dir"));
}

void check_data_file(const TrainConfig& c) {
  if (c.data.path.empty())
    H2_THROW(ConfigError, "data.path is not set ({}); name the training data file",
             c.origin_of("data.path"));
  data::expand_data_paths(c.data.path, show(c, "data.path", fmt::format("'{}'", c.data.path)));
  if (!c.data.val_path.empty())
    data::expand_data_paths(c.data.val_path,
                            show(c, "data.val_path", fmt::format("'{}'", c.data.val_path)));
}

void check_parallel(const TrainConfig& c) {
  const ParallelConfig& p = c.parallel;
  if (p.chunks > 1 && p.schedule != ScheduleKind::kInterleaved1F1B)
    H2_THROW(ConfigError, "{} needs {}", show(c, "parallel.chunks", p.chunks),
             show(c, "parallel.schedule", "interleaved-1f1b"));
  if (p.stage_layers.empty()) return;
  const std::vector<int> blocks = stage_layer_counts(p.stage_layers);
  int64_t sum = 0;
  for (int b : blocks) sum += b;
  if (sum != c.model.n_layers)
    H2_THROW(ConfigError, "{} sums to {} blocks, but {}",
             show(c, "parallel.stage_layers", fmt::format("'{}'", p.stage_layers)), sum,
             show(c, "model.n_layers", c.model.n_layers));
}

}  // namespace

std::vector<int> stage_layer_counts(const std::string& text, std::string_view key) {
  std::vector<int> blocks;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    if (!numeric(item) || item.size() > 6)
      H2_THROW(ConfigError, "{} = '{}': '{}' is not a count", key, text, item);
    blocks.push_back(std::stoi(item));
    start = comma + 1;
  }
  return blocks;
}

std::string device_for_rank(const TrainConfig& c, int rank, int ranks) {
  if (c.cluster.devices.empty()) return c.train.device;
  std::vector<std::string> devices;
  size_t start = 0;
  while (start <= c.cluster.devices.size()) {
    size_t comma = c.cluster.devices.find(',', start);
    if (comma == std::string::npos) comma = c.cluster.devices.size();
    devices.push_back(c.cluster.devices.substr(start, comma - start));
    start = comma + 1;
  }
  if (int(devices.size()) != ranks)
    H2_THROW(ConfigError, "{} lists {} devices for a job of {} ranks",
             show(c, "cluster.devices", fmt::format("'{}'", c.cluster.devices)), devices.size(),
             ranks);
  const std::string& device = devices.at(size_t(rank));
  if (!valid_device(device))
    H2_THROW(ConfigError, "{}: '{}' (rank {}) is not a device like cpu, cuda:N or vchip:NAME",
             show(c, "cluster.devices", fmt::format("'{}'", c.cluster.devices)), device, rank);
  return device;
}

void validate(const TrainConfig& config, ValidateOptions options) {
  check_model(config);
  check_sizes(config);
  check_train(config);
  check_checkpoint(config);
  check_parallel(config);
  check_precision(config);
  if (options.check_files) check_data_file(config);
}

}  // namespace h2::config
