// HeteroPP plan files (see plan.h).
#include "train/config/plan.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace h2::config {
namespace {

std::string at(const std::string& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file, node.Mark().line + 1);
}

// "0-2" or "3" (one block) or a two-element list [0, 2].
std::pair<int, int> parse_layers(const YAML::Node& node, const std::string& where) {
  try {
    if (node.IsSequence() && node.size() == 2) return {node[0].as<int>(), node[1].as<int>()};
    const std::string text = node.as<std::string>();
    const size_t dash = text.find('-');
    if (dash == std::string::npos) return {std::stoi(text), std::stoi(text)};
    return {std::stoi(text.substr(0, dash)), std::stoi(text.substr(dash + 1))};
  } catch (const std::exception&) {
    H2_THROW(ConfigError, "{}: layers must be FIRST-LAST (e.g. 0-2) or [FIRST, LAST]", where);
  }
}

}  // namespace

Plan load_plan(const std::string& path) {
  if (!std::filesystem::exists(path))
    H2_THROW(ConfigError, "parallel.plan = '{}': file not found", path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: not YAML: {}", path, e.mark.line + 1, e.msg);
  }
  const YAML::Node stages = root["stages"];
  if (!stages || !stages.IsSequence() || stages.size() == 0)
    H2_THROW(ConfigError, "{}: a plan needs a non-empty 'stages' list", path);
  Plan plan;
  plan.source = path;
  for (const YAML::Node& s : stages) {
    PlanStage stage;
    stage.where = at(path, s);
    for (const auto& entry : s) {
      const std::string key = entry.first.as<std::string>();
      if (key != "layers" && key != "chip" && key != "ranks")
        H2_THROW(ConfigError, "{}: unknown stage key '{}' (layers, chip, ranks)",
                 at(path, entry.first), key);
    }
    if (!s["layers"] || !s["chip"] || !s["ranks"])
      H2_THROW(ConfigError, "{}: a stage needs layers, chip and ranks", stage.where);
    std::tie(stage.first_layer, stage.last_layer) = parse_layers(s["layers"], stage.where);
    stage.chip = s["chip"].as<std::string>();
    try {
      stage.ranks = s["ranks"].as<std::vector<int>>();
    } catch (const YAML::Exception&) {
      H2_THROW(ConfigError, "{}: ranks must be a list of integers", at(path, s["ranks"]));
    }
    if (stage.ranks.empty()) H2_THROW(ConfigError, "{}: a stage needs ranks", stage.where);
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

void apply_plan(const Plan& plan, TrainConfig& c, int world_size) {
  std::vector<std::string> layers, ranks, devices;
  int next_layer = 0, next_rank = 0;
  for (const PlanStage& s : plan.stages) {
    if (s.first_layer != next_layer || s.last_layer < s.first_layer)
      H2_THROW(ConfigError,
               "{}: layers {}-{} do not continue at layer {} (stages cover the {} blocks once, "
               "in order)",
               s.where, s.first_layer, s.last_layer, next_layer, c.model.n_layers);
    next_layer = s.last_layer + 1;
    for (int r : s.ranks) {
      if (r != next_rank)
        H2_THROW(ConfigError,
                 "{}: rank {} where rank {} comes next (stage groups are consecutive ranks, "
                 "each once, in order)",
                 s.where, r, next_rank);
      if (r >= world_size)
        H2_THROW(ConfigError, "{}: rank {} does not exist in a job of {} ranks", s.where, r,
                 world_size);
      ++next_rank;
      devices.push_back(s.chip);
    }
    if (c.train.batch_size % int64_t(s.ranks.size()) != 0)
      H2_THROW(ConfigError, "{}: train.batch_size = {} is not divisible by the group's {} ranks",
               s.where, c.train.batch_size, s.ranks.size());
    layers.push_back(std::to_string(s.last_layer - s.first_layer + 1));
    ranks.push_back(std::to_string(s.ranks.size()));
  }
  if (next_layer != c.model.n_layers)
    H2_THROW(ConfigError, "{}: the stages cover {} blocks; model.n_layers = {}", plan.source,
             next_layer, c.model.n_layers);
  if (next_rank != world_size)
    H2_THROW(ConfigError, "{}: the stages use {} ranks; the job has {}", plan.source, next_rank,
             world_size);
  c.parallel.stage_layers = fmt::format("{}", fmt::join(layers, ","));
  c.parallel.stage_ranks = fmt::format("{}", fmt::join(ranks, ","));
  c.cluster.devices = fmt::format("{}", fmt::join(devices, ","));
  for (const char* key : {"parallel.stage_layers", "parallel.stage_ranks", "cluster.devices"})
    c.origin[key] = plan.source;
}

MemoryEstimate estimate_stage_memory(const TrainConfig& config, int first_block, int last_block,
                                     bool first_stage, bool last_stage, int group, int stashed) {
  const ModelConfig& m = config.model;
  const int64_t C = m.dim, F = m.ffn_dim, V = m.vocab_size, H = m.n_heads;
  const int64_t kv = C / m.n_heads * m.n_kv_heads;
  const int64_t per_block = 2 * C * C + 2 * C * kv + 3 * C * F + 2 * C;
  MemoryEstimate e;
  e.parameters = per_block * (last_block - first_block + 1);
  if (first_stage) e.parameters += V * C;
  if (last_stage) e.parameters += C + (m.tie_embeddings ? 0 : V * C);
  // f32 weights and gradients while in use, AdamW's FP32 master-less moments; FSDP divides the
  // persistent part (masters, gradient shards, moments) by the group.
  const int64_t persistent = config.parallel.fsdp ? 16 * e.parameters / group : 12 * e.parameters;
  const int64_t in_use = config.parallel.fsdp ? 8 * e.parameters : 4 * e.parameters;
  e.model_state_bytes = persistent + in_use;
  // Activations a block's backward keeps per token: norm inputs, q/k/v, attention output, the
  // MLP's gate/up/activation, plus the attention log-sum-exp; the head keeps its input and the
  // logits' gradient.
  const int64_t rows = config.train.batch_size / group, tokens = rows * m.seq_len;
  int64_t per_token = (last_block - first_block + 1) * (6 * C + 2 * kv + 3 * F + H);
  if (last_stage) per_token += C + 2 * V;
  e.activation_bytes = 4 * tokens * per_token * int64_t(std::max(stashed, 1));
  return e;
}

}  // namespace h2::config
