// HeteroPP plan files (see plan.h).
#include "train/config/plan.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "core/input_file.h"
#include "train/config/keys.h"

namespace h2::config {
namespace {

std::string at(const std::string& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file, node.Mark().line + 1);
}

// The text of a key, which must be a plain name (a list or map as a key has no text).
std::string key_text(const YAML::Node& key, const std::string& file) {
  if (!key.IsScalar())
    H2_THROW(ConfigError, "{}: a plan key must be a plain name, not a list or map", at(file, key));
  return key.Scalar();
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

// Plan-file keys that set a config key, and the key each sets.
constexpr std::pair<const char*, const char*> kSettings[] = {
    {"replicas", "parallel.replicas"},
    {"micro_batch_rows", "train.batch_size"},
    {"micro_batches", "train.grad_accum"},
    {"schedule", "parallel.schedule"},
    {"chunks", "parallel.chunks"},
    {"lead", "parallel.lead"},
    {"fsdp", "parallel.fsdp"},
    {"gather_group", "parallel.gather_group"},
    {"recompute", "parallel.recompute"},
    {"wire_dtype", "parallel.wire_dtype"}};

const char* setting_key(const std::string& name) {
  for (const auto& [file_key, config_key] : kSettings)
    if (name == file_key) return config_key;
  return nullptr;
}

std::vector<double> doubles(const YAML::Node& node, const std::string& where) {
  try {
    return node.as<std::vector<double>>();
  } catch (const YAML::Exception&) {
    H2_THROW(ConfigError, "{}: expected a list of numbers", where);
  }
}

PlanPrediction read_prediction(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) H2_THROW(ConfigError, "{}: predicted must be a map", at(path, node));
  PlanPrediction p;
  try {
    if (node["step_ms"]) p.step_ms = node["step_ms"].as<double>();
    if (node["tokens_per_s"]) p.tokens_per_s = node["tokens_per_s"].as<double>();
  } catch (const YAML::Exception&) {
    H2_THROW(ConfigError, "{}: predicted step_ms and tokens_per_s are numbers", at(path, node));
  }
  if (node["peak_mib"]) p.peak_mib = doubles(node["peak_mib"], at(path, node["peak_mib"]));
  if (node["busy_ms"]) p.busy_ms = doubles(node["busy_ms"], at(path, node["busy_ms"]));
  return p;
}

Plan plan_from_yaml(const YAML::Node& root, const std::string& path) {
  if (!root.IsMap()) H2_THROW(ConfigError, "{}: a plan is a map with a 'stages' list", path);
  Plan plan;
  plan.source = path;
  for (const auto& entry : root) {
    const std::string key = key_text(entry.first, path);
    if (key == "stages") continue;
    if (key == "predicted") {
      plan.predicted = read_prediction(entry.second, path);
      continue;
    }
    const char* config_key = setting_key(key);
    if (config_key == nullptr || !entry.second.IsScalar())
      H2_THROW(ConfigError,
               "{}: unknown plan key '{}' (stages, predicted, replicas, micro_batch_rows, "
               "micro_batches, schedule, chunks, lead, fsdp, gather_group, recompute, "
               "wire_dtype)",
               at(path, entry.first), key);
    plan.settings.push_back({config_key, entry.second.Scalar(), at(path, entry.second)});
  }
  const YAML::Node stages = root["stages"];
  if (!stages || !stages.IsSequence() || stages.size() == 0)
    H2_THROW(ConfigError, "{}: a plan needs a non-empty 'stages' list", path);
  for (const YAML::Node& s : stages) {
    PlanStage stage;
    stage.where = at(path, s);
    if (!s.IsMap())
      H2_THROW(ConfigError, "{}: a stage is a map {{layers, chip, ranks}}{}", stage.where,
               s.IsScalar() ? fmt::format(", not '{}'", s.Scalar()) : std::string());
    for (const auto& entry : s) {
      const std::string key = key_text(entry.first, path);
      if (key != "layers" && key != "chip" && key != "ranks")
        H2_THROW(ConfigError, "{}: unknown stage key '{}' (layers, chip, ranks)",
                 at(path, entry.first), key);
    }
    if (!s["layers"] || !s["chip"] || !s["ranks"])
      H2_THROW(ConfigError, "{}: a stage needs layers, chip and ranks", stage.where);
    std::tie(stage.first_layer, stage.last_layer) = parse_layers(s["layers"], stage.where);
    if (!s["chip"].IsScalar())
      H2_THROW(ConfigError,
               "{}: chip must be one device spec (e.g. vchip:chip-a), not a list or map",
               at(path, s["chip"]));
    stage.chip = s["chip"].Scalar();
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

}  // namespace

Plan load_plan(const std::string& path) {
  return parse_plan(read_input_file(path, "parallel.plan"), path);
}

Plan parse_plan(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: not YAML: {}", path, e.mark.line + 1, e.msg);
  }
  try {
    return plan_from_yaml(root, path);
  } catch (const YAML::Exception& e) {  // a conversion the checks above did not anticipate
    H2_THROW(ConfigError, "{}:{}: {}", path, e.mark.line + 1, e.msg);
  }
}

void apply_plan(const Plan& plan, TrainConfig& c, int world_size) {
  for (const PlanSetting& s : plan.settings) {  // through the key table: checked like any key
    set_from_text(*find_key(s.key), c, s.value, s.where);
    c.origin[s.key] = s.where;
  }
  const int S = int(plan.stages.size());
  // In int64: int() of a large chunks value (a plan's 'chunks: 4294967296') could be 0.
  const int64_t chunks = c.parallel.chunks;
  if (chunks < 1 || S % chunks != 0)
    H2_THROW(ConfigError, "{}: {} stages do not go round the groups {} times (parallel.chunks)",
             plan.source, S, chunks);
  const int P = int(S / chunks);
  std::vector<std::string> layers, ranks, devices;
  int next_layer = 0, next_rank = 0;
  for (int i = 0; i < S; ++i) {
    const PlanStage& s = plan.stages[size_t(i)];
    if (s.first_layer != next_layer || s.last_layer < s.first_layer - 1)
      H2_THROW(ConfigError,
               "{}: layers {}-{} do not continue at layer {} (stages cover the {} blocks once, "
               "in order)",
               s.where, s.first_layer, s.last_layer, next_layer, c.model.n_layers);
    // Before any arithmetic on it: a last layer near INT_MAX would overflow next_layer.
    if (s.last_layer >= c.model.n_layers)
      H2_THROW(ConfigError,
               "{}: layers {}-{} go past the model's last block {} (model.n_layers = {})", s.where,
               s.first_layer, s.last_layer, c.model.n_layers - 1, c.model.n_layers);
    next_layer = s.last_layer + 1;
    layers.push_back(std::to_string(s.last_layer - s.first_layer + 1));
    if (i >= P) {  // interleaved: later rounds revisit the first round's groups
      const PlanStage& first = plan.stages[size_t(i % P)];
      if (s.ranks != first.ranks || s.chip != first.chip)
        H2_THROW(ConfigError,
                 "{}: with {} chunks, stage {} runs on stage {}'s group ({}, ranks {})", s.where,
                 chunks, i, i % P, first.chip, fmt::join(first.ranks, ", "));
      continue;
    }
    for (int r : s.ranks) {
      if (r != next_rank)
        H2_THROW(ConfigError,
                 "{}: rank {} where rank {} comes next (stage groups are consecutive ranks, "
                 "each once, in order)",
                 s.where, r, next_rank);
      if (int64_t(r) * c.parallel.replicas >= world_size)
        H2_THROW(ConfigError, "{}: rank {} does not exist in a job of {} ranks ({} per replica)",
                 s.where, r, world_size, world_size / c.parallel.replicas);
      ++next_rank;
      devices.push_back(s.chip);
    }
    if (c.train.batch_size % int64_t(s.ranks.size()) != 0)
      H2_THROW(ConfigError, "{}: train.batch_size = {} is not divisible by the group's {} ranks",
               s.where, c.train.batch_size, s.ranks.size());
    ranks.push_back(std::to_string(s.ranks.size()));
  }
  if (next_layer != c.model.n_layers)
    H2_THROW(ConfigError, "{}: the stages cover {} blocks; model.n_layers = {}", plan.source,
             next_layer, c.model.n_layers);
  const int64_t replicas = c.parallel.replicas;
  if (next_rank * replicas != world_size)
    H2_THROW(ConfigError, "{}: the stages use {} ranks x {} replica{}; the job has {}", plan.source,
             next_rank, replicas, replicas == 1 ? "" : "s", world_size);
  std::vector<std::string> all_devices;
  for (int64_t r = 0; r < replicas; ++r)
    all_devices.insert(all_devices.end(), devices.begin(), devices.end());
  c.parallel.mode = ParallelMode::pipeline;
  c.parallel.stage_layers = fmt::format("{}", fmt::join(layers, ","));
  c.parallel.stage_ranks = fmt::format("{}", fmt::join(ranks, ","));
  c.cluster.devices = fmt::format("{}", fmt::join(all_devices, ","));
  for (const char* key :
       {"parallel.mode", "parallel.stage_layers", "parallel.stage_ranks", "cluster.devices"})
    c.origin[key] = plan.source;
  c.prediction = plan.predicted;
}

std::string plan_file_text(const parallel::Plan& plan, const std::vector<std::string>& chips,
                           const PlanPrediction& predicted, const std::string& header) {
  std::string out;
  for (size_t start = 0; start < header.size();) {
    size_t end = header.find('\n', start);
    if (end == std::string::npos) end = header.size();
    out += "# " + header.substr(start, end - start) + "\n";
    start = end + 1;
  }
  out += fmt::format("replicas: {}\nmicro_batch_rows: {}\nmicro_batches: {}\n", plan.replicas,
                     plan.micro_batch_rows, plan.micro_batches);
  out += fmt::format("schedule: {}\nchunks: {}\nfsdp: {}\n",
                     parallel::pipeline::schedule_kind_name(plan.schedule), plan.chunks,
                     plan.fsdp ? "true" : "false");
  if (plan.lead > 0) out += fmt::format("lead: {}\n", plan.lead);
  if (plan.fsdp) out += fmt::format("gather_group: {}\n", plan.gather_group);
  out += fmt::format("recompute: {}\nwire_dtype: {}\n", plan.recompute ? "true" : "false",
                     plan.wire_dtype ? std::string(dtype_name(*plan.wire_dtype)) : "auto");
  auto list = [](const std::vector<double>& v) {
    std::vector<std::string> parts;
    for (double x : v) parts.push_back(fmt::format("{:.1f}", x));
    return fmt::format("[{}]", fmt::join(parts, ", "));
  };
  out += fmt::format(
      "predicted: {{step_ms: {:.2f}, tokens_per_s: {:.0f}, peak_mib: {}, busy_ms: "
      "{}}}\nstages:\n",
      predicted.step_ms, predicted.tokens_per_s, list(predicted.peak_mib), list(predicted.busy_ms));
  const int P = plan.positions();
  const int layers_total = plan.layout.first.back() - 2;
  for (int s = 0; s < plan.stages(); ++s) {
    const int q = s % P;
    const int first = std::max(plan.layout.begin(s), 1) - 1;
    const int last = std::min(plan.layout.end(s), layers_total + 1) - 2;
    std::vector<int> ranks;
    int rank = 0;
    for (int k = 0; k < q; ++k) rank += plan.group_sizes[size_t(k)];
    for (int k = 0; k < plan.group_sizes[size_t(q)]; ++k) ranks.push_back(rank + k);
    out += fmt::format("  - {{layers: {}-{}, chip: \"vchip:{}\", ranks: [{}]}}\n", first, last,
                       chips[size_t(q)], fmt::join(ranks, ", "));
  }
  return out;
}

MemoryEstimate estimate_stage_memory(const TrainConfig& config, int first_block, int last_block,
                                     bool first_stage, bool last_stage, int group, int stashed) {
  // In double, saturated into the int64 fields: a config far beyond any machine (a batch of 2^60,
  // a width of 2^32) must come out too large for it, not wrap into a small number that passes.
  const ModelConfig& m = config.model;
  const double C = double(m.dim), F = double(m.ffn_dim), V = double(m.vocab_size);
  const double H = double(m.n_heads);
  const double kv = double(m.dim / m.n_heads * m.n_kv_heads);
  const double per_block = 2 * C * C + 2 * C * kv + 3 * C * F + 2 * C;
  const double blocks = double(last_block - first_block + 1);
  double parameters = per_block * blocks;
  if (first_stage) parameters += V * C;
  // The head: its norm, and its table unless the stage also holds the embedding it is tied to (a
  // tied table on another stage is copied to the last stage, whose gradients are summed).
  if (last_stage) parameters += C + (m.tie_embeddings && first_stage ? 0 : V * C);
  // f32 weights and gradients while in use, AdamW's FP32 master-less moments; FSDP divides the
  // persistent part (masters, gradient shards, moments) by the group.
  const double persistent =
      config.parallel.fsdp ? 16 * parameters / double(group) : 12 * parameters;
  const double in_use = config.parallel.fsdp ? 8 * parameters : 4 * parameters;
  // Activations a block's backward keeps per token, in the compute dtype: norm inputs, q/k/v,
  // attention output, the MLP's gate/up/activation; plus the attention log-sum-exp, always f32.
  // The head keeps its input and the logits and their gradient, in the compute dtype.
  const double tokens = double(config.train.batch_size / group) * double(m.seq_len);
  const double element = double(dtype_storage_bytes(config.train.dtype, 1));
  double per_token = blocks * ((6 * C + 2 * kv + 3 * F) * element + H * 4);
  if (last_stage) per_token += (C + 2 * V) * element;
  const auto saturated = [](double bytes) {  // at 2^60: sums of a few, total(), stay in range
    constexpr double kMost = 0x1p60;
    return bytes >= kMost ? int64_t(kMost) : int64_t(bytes);
  };
  MemoryEstimate e;
  e.parameters = saturated(parameters);
  e.model_state_bytes = saturated(persistent + in_use);
  e.activation_bytes = saturated(tokens * per_token * double(std::max(stashed, 1)));
  return e;
}

}  // namespace h2::config
