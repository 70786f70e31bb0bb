// Hugging Face LlamaForCausalLM folders (see hf_format.h): the tensor list, config.json, dtype
// conversion, shard planning, writing and reading.
#include "train/checkpoint/hf_format.h"

#include "core/input_file.h"
#include "train/checkpoint/durable_io.h"
#include "train/checkpoint/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/half_float.h"
#include "core/json_int.h"

namespace h2::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kGenerationConfigFile = "generation_config.json";

std::string shard_name(size_t i, size_t n) {
  return fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, n);
}

const char* torch_dtype_name(DType dtype) {
  if (dtype == DType::f32) return "float32";
  if (dtype == DType::bf16) return "bfloat16";
  H2_THROW(ConfigError, "Hugging Face export supports the dtypes f32 and bf16, not {}",
           dtype_name(dtype));
}

// `t` as f32 (f32, bf16 and f16 widen exactly); `what` names the file and tensor in errors.
StoredTensor to_f32(const StoredTensor& t, const std::string& what) {
  if (t.dtype == DType::f32) return t;
  if (t.dtype != DType::bf16 && t.dtype != DType::f16)
    H2_THROW(ConfigError, "{}: dtype {} is not a float dtype (expected F32, BF16 or F16)", what,
             dtype_name(t.dtype));
  const int64_t n = t.shape.numel();
  StoredTensor out{DType::f32, t.shape, std::vector<std::byte>(size_t(n) * 4)};
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, t.bytes.data() + 2 * i, 2);
    float v = t.dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    std::memcpy(out.bytes.data() + 4 * i, &v, 4);
  }
  return out;
}

// An f32 tensor in `dtype` (f32 or bf16, the latter rounded to nearest, ties to even).
StoredTensor from_f32(const StoredTensor& t, DType dtype) {
  if (dtype == DType::f32) return t;
  const int64_t n = t.shape.numel();
  StoredTensor out{DType::bf16, t.shape, std::vector<std::byte>(size_t(n) * 2)};
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    uint16_t bits = f32_to_bf16(v);
    std::memcpy(out.bytes.data() + 2 * i, &bits, 2);
  }
  return out;
}

// Groups tensors (sizes in order) into shards as huggingface_hub does: a tensor starts a new
// shard when it would push the current one over `max_bytes`; a tensor larger than that gets a
// shard of its own.
std::vector<std::vector<size_t>> plan_shards(const std::vector<int64_t>& sizes, int64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  int64_t current = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (shards.empty() || current + sizes[i] > max_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += sizes[i];
  }
  return shards;
}

// config.json or the index: small files, read whole after checks (core/input_file.h).
std::string read_text(const fs::path& path) {
  return read_input_file(path.string(), "model file");
}

void write_text(const fs::path& path, const std::string& text) {
  fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) H2_THROW(Error, "writing '{}' failed (disk full?)", tmp.string());
  }
  fs::rename(tmp, path);
}

// Earlier exports' files, which a loader would otherwise mix with the new ones; tokenizer files
// only where this export writes a tokenizer (else they may be the user's own, added as the
// export of a model trained on token ids asks).
void remove_previous_export(const fs::path& dir, bool replaces_tokenizer) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    bool shard = name.starts_with("model-") && name.ends_with(".safetensors");
    const auto& tokenizer = hf_tokenizer_file_names();
    const bool tokenizer_file =
        std::find(tokenizer.begin(), tokenizer.end(), name) != tokenizer.end();
    if (name == kConfigFile || name == kSingleFile || name == kIndexFile || shard ||
        name == kGenerationConfigFile || (tokenizer_file && replaces_tokenizer))
      fs::remove(entry.path());
  }
}

// Whether `dir` holds any tokenizer file to copy.
bool has_tokenizer_files(const std::string& dir) {
  if (dir.empty()) return false;
  for (const std::string& name : hf_tokenizer_file_names())
    if (fs::is_regular_file(fs::path(dir) / name)) return true;
  return false;
}

// The file each tensor lives in: one file, or the index's weight_map.
std::map<std::string, std::string> weight_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  fs::path index = dir / kIndexFile;
  if (!fs::exists(index)) {
    if (!fs::exists(dir / kSingleFile))
      H2_THROW(ConfigError, "{}: neither {} nor {} (not a Hugging Face model folder?)",
               dir.string(), kSingleFile, kIndexFile);
    return {{"", kSingleFile}};  // "": every tensor
  }
  try {
    nlohmann::json j = nlohmann::json::parse(read_text(index));
    for (const auto& [name, file] : j.at("weight_map").items()) {
      files[name] = file.get<std::string>();
      check_plain_file_name(files[name], index.string());
    }
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed index: {}", index.string(), e.what());
  }
  return files;
}

// The rotary settings: transformers 4 writes "rope_theta" and "rope_scaling" (null, or a RoPE
// variant), transformers 5 "rope_parameters": {"rope_type", "rope_theta", ...}. Plain RoPE
// ("default") and Llama 3's scaling ("llama3") are accepted, into m.rope_*; values given twice
// must agree.
void read_rope(const nlohmann::json& j, const std::string& path, config::ModelConfig& m) {
  try {
    m.rope_theta = j.value("rope_theta", 10000.0);
    bool theta_seen = j.contains("rope_theta");
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      const nlohmann::json& rope = j[key];
      const std::string kind = rope.is_object()
                                   ? rope.value("rope_type", rope.value("type", "default"))
                                   : std::string("?");
      if (kind == "llama3") {
        m.rope_scaling_factor = rope.at("factor").get<double>();
        m.rope_low_freq_factor = rope.at("low_freq_factor").get<double>();
        m.rope_high_freq_factor = rope.at("high_freq_factor").get<double>();
        m.rope_original_max_positions =
            json_int(rope.at("original_max_position_embeddings"),
                     path + ": " + key + ".original_max_position_embeddings", 1, int64_t(1) << 40);
        if (!(m.rope_scaling_factor > 0 && m.rope_low_freq_factor > 0 &&
              m.rope_high_freq_factor > m.rope_low_freq_factor &&
              m.rope_original_max_positions > 0))
          H2_THROW(ConfigError,
                   "{}: {} {}: llama3 scaling needs factor > 0, 0 < low_freq_factor < "
                   "high_freq_factor and original_max_position_embeddings > 0",
                   path, key, rope.dump());
      } else if (kind != "default") {
        H2_THROW(ConfigError,
                 "{}: {} {} is not supported (h2 implements plain RoPE and rope_type llama3)", path,
                 key, rope.dump());
      }
      if (!rope.contains("rope_theta")) continue;
      const double nested = rope["rope_theta"].get<double>();
      if (theta_seen && nested != m.rope_theta)
        H2_THROW(ConfigError, "{}: rope_theta {} differs from {}.rope_theta {}", path, m.rope_theta,
                 key, nested);
      m.rope_theta = nested;
      theta_seen = true;
    }
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed rotary settings: {}", path, e.what());
  }
}

// A special token id of config.json: absent or null -> -1; a list (Llama 3 instruct's several
// end tokens) -> its first id.
int64_t token_id(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return -1;
  const nlohmann::json& value = j[key].is_array() && !j[key].empty() ? j[key][0] : j[key];
  if (!value.is_number_integer() || value.get<int64_t>() < 0)
    H2_THROW(ConfigError, "{}: \"{}\" is {}, not a token id", path, key, j[key].dump());
  return value.get<int64_t>();
}

// The rotary settings as transformers 5 writes them.
nlohmann::ordered_json rope_parameters(const config::ModelConfig& m) {
  nlohmann::ordered_json rope;
  rope["rope_type"] = m.rope_scaling_factor > 0 ? "llama3" : "default";
  rope["rope_theta"] = m.rope_theta;
  if (m.rope_scaling_factor > 0) {
    rope["factor"] = m.rope_scaling_factor;
    rope["low_freq_factor"] = m.rope_low_freq_factor;
    rope["high_freq_factor"] = m.rope_high_freq_factor;
    rope["original_max_position_embeddings"] = m.rope_original_max_positions;
  }
  return rope;
}

bool ignored_tensor(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq");
}

}  // namespace

std::vector<HfTensorSpec> hf_tensor_specs(const config::ModelConfig& m) {
  const int64_t C = m.dim, D = m.dim / m.n_heads, H = m.n_heads, Hkv = m.n_kv_heads;
  std::vector<HfTensorSpec> specs{{"model.embed_tokens.weight", {m.vocab_size, C}}};
  for (int64_t l = 0; l < m.n_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    specs.push_back({p + "input_layernorm.weight", {C}});
    specs.push_back({p + "self_attn.q_proj.weight", {H * D, C}});
    specs.push_back({p + "self_attn.k_proj.weight", {Hkv * D, C}});
    specs.push_back({p + "self_attn.v_proj.weight", {Hkv * D, C}});
    specs.push_back({p + "self_attn.o_proj.weight", {C, H * D}});
    specs.push_back({p + "post_attention_layernorm.weight", {C}});
    specs.push_back({p + "mlp.gate_proj.weight", {m.ffn_dim, C}});
    specs.push_back({p + "mlp.up_proj.weight", {m.ffn_dim, C}});
    specs.push_back({p + "mlp.down_proj.weight", {C, m.ffn_dim}});
  }
  specs.push_back({"model.norm.weight", {C}});
  if (!m.tie_embeddings) specs.push_back({"lm_head.weight", {m.vocab_size, C}});
  return specs;
}

std::string hf_config_json(const config::ModelConfig& m, DType dtype) {
  // The fields transformers 5 writes (dtype, rope_parameters), with rope_theta and rope_scaling
  // beside them for transformers 4 readers.
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = m.vocab_size;
  j["hidden_size"] = m.dim;
  j["intermediate_size"] = m.ffn_dim;
  j["num_hidden_layers"] = m.n_layers;
  j["num_attention_heads"] = m.n_heads;
  j["num_key_value_heads"] = m.n_kv_heads;
  j["head_dim"] = m.dim / m.n_heads;
  j["max_position_embeddings"] = m.seq_len;
  j["rope_parameters"] = rope_parameters(m);
  j["rope_theta"] = m.rope_theta;
  j["rope_scaling"] = m.rope_scaling_factor > 0 ? nlohmann::ordered_json(rope_parameters(m))
                                                : nlohmann::ordered_json(nullptr);
  j["rms_norm_eps"] = m.norm_eps;
  j["tie_word_embeddings"] = m.tie_embeddings;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["mlp_bias"] = false;
  for (const auto& [key, id] : {std::pair{"bos_token_id", m.bos_token_id},
                                {"eos_token_id", m.eos_token_id},
                                {"pad_token_id", m.pad_token_id}})
    j[key] = id >= 0 ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr);
  j["dtype"] = torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

std::string hf_generation_config_json(const config::ModelConfig& m) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [key, id] : {std::pair{"bos_token_id", m.bos_token_id},
                                {"eos_token_id", m.eos_token_id},
                                {"pad_token_id", m.pad_token_id}})
    if (id >= 0) j[key] = id;
  j["max_length"] = m.seq_len;
  return j.dump(2) + "\n";
}

HfConfig parse_hf_config(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: not JSON: {}", path, e.what());
  }
  if (!j.is_object()) H2_THROW(ConfigError, "{}: not a JSON object", path);
  auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  auto get = [&]<typename T>(const char* key, T fallback, bool required) -> T {
    if (!has(key)) {
      if (required) H2_THROW(ConfigError, "{}: missing \"{}\"", path, key);
      return fallback;
    }
    // nlohmann converts between number kinds silently (32.5 -> 32): sizes must be integers.
    const bool right_kind = std::is_same_v<T, bool>       ? j[key].is_boolean()
                            : std::is_integral_v<T>       ? j[key].is_number_integer()
                            : std::is_floating_point_v<T> ? j[key].is_number()
                                                          : true;
    if (!right_kind)
      H2_THROW(ConfigError, "{}: \"{}\" is {}, of the wrong type", path, key, j[key].dump());
    try {
      return j[key].get<T>();
    } catch (const nlohmann::json::exception&) {
      H2_THROW(ConfigError, "{}: \"{}\" is {}, of the wrong type", path, key, j[key].dump());
    }
  };
  std::string type = get("model_type", std::string(), true);
  if (type != "llama")
    H2_THROW(ConfigError, "{}: model_type \"{}\" is not supported (h2 reads \"llama\")", path,
             type);
  HfConfig out;
  config::ModelConfig& m = out.model;
  m.vocab_size = get("vocab_size", int64_t(0), true);
  m.dim = get("hidden_size", int64_t(0), true);
  m.ffn_dim = get("intermediate_size", int64_t(0), true);
  m.n_layers = get("num_hidden_layers", int64_t(0), true);
  m.n_heads = get("num_attention_heads", int64_t(0), true);
  m.n_kv_heads = get("num_key_value_heads", m.n_heads, false);  // transformers' defaults below
  m.seq_len = get("max_position_embeddings", int64_t(2048), false);
  read_rope(j, path, m);
  m.norm_eps = get("rms_norm_eps", 1e-6, false);
  m.bos_token_id = token_id(j, "bos_token_id", path);
  m.eos_token_id = token_id(j, "eos_token_id", path);
  m.pad_token_id = token_id(j, "pad_token_id", path);
  m.tie_embeddings = get("tie_word_embeddings", false, false);
  if (m.vocab_size < 1 || m.dim < 1 || m.ffn_dim < 1 || m.n_layers < 0 || m.n_heads < 1 ||
      m.n_kv_heads < 1 || m.seq_len < 1 || !(m.rope_theta > 0) || !(m.norm_eps > 0))
    H2_THROW(ConfigError, "{}: sizes, rope_theta and rms_norm_eps must be positive", path);
  if (m.dim % m.n_heads != 0 || m.n_heads % m.n_kv_heads != 0 || (m.dim / m.n_heads) % 2 != 0)
    H2_THROW(ConfigError,
             "{}: hidden_size {}, num_attention_heads {}, num_key_value_heads {}: heads must "
             "divide hidden_size, key/value heads must divide heads, head dim must be even",
             path, m.dim, m.n_heads, m.n_kv_heads);
  if (int64_t head_dim = get("head_dim", m.dim / m.n_heads, false); head_dim != m.dim / m.n_heads)
    H2_THROW(ConfigError, "{}: head_dim {} differs from hidden_size / num_attention_heads = {}",
             path, head_dim, m.dim / m.n_heads);
  if (std::string act = get("hidden_act", std::string("silu"), false); act != "silu")
    H2_THROW(ConfigError, "{}: hidden_act \"{}\" is not supported (h2 uses silu)", path, act);
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (get(key, false, false)) H2_THROW(ConfigError, "{}: {} is not supported", path, key);
  std::string dtype = get("dtype", get("torch_dtype", std::string("float32"), false), false);
  out.dtype = dtype == "bfloat16" ? DType::bf16 : dtype == "float16" ? DType::f16 : DType::f32;
  return out;
}

void write_hf_model(const std::string& dir, const config::ModelConfig& model,
                    const TensorMap& tensors, const HfWriteOptions& options) {
  const std::string config_text = hf_config_json(model, options.dtype);  // checks the dtype
  H2_CHECK(options.max_shard_bytes > 0, "Hugging Face export: shard size {} must be positive",
           options.max_shard_bytes);
  const std::vector<HfTensorSpec> specs = hf_tensor_specs(model);
  std::set<std::string> expected;
  std::vector<StoredTensor> converted;
  std::vector<int64_t> sizes;
  for (const HfTensorSpec& spec : specs) {
    expected.insert(spec.name);
    auto it = tensors.find(spec.name);
    if (it == tensors.end())
      H2_THROW(ConfigError, "{}: no tensor '{}' (Hugging Face export)", options.source, spec.name);
    if (!(it->second.shape == spec.shape))
      H2_THROW(ConfigError, "{}: tensor '{}' is {} but the model config says {}", options.source,
               spec.name, it->second.shape.str(), spec.shape.str());
    converted.push_back(from_f32(
        to_f32(it->second, options.source + ": tensor '" + spec.name + "'"), options.dtype));
    sizes.push_back(int64_t(converted.back().bytes.size()));
  }
  for (const auto& [name, t] : tensors)
    if (!expected.contains(name))
      H2_THROW(ConfigError, "{}: tensor '{}' is not part of a Llama with this config",
               options.source, name);

  fs::create_directories(dir);
  remove_previous_export(
      dir, has_tokenizer_files(options.tokenizer_dir) || options.byte_level_tokenizer);
  const auto shards = plan_shards(sizes, options.max_shard_bytes);
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  int64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string file = shards.size() == 1 ? kSingleFile : shard_name(s, shards.size());
    TensorMap shard;
    for (size_t i : shards[s]) {
      weight_map[specs[i].name] = file;
      total += sizes[i];
      shard.emplace(specs[i].name, std::move(converted[i]));
    }
    write_safetensors((fs::path(dir) / file).string(), shard);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    write_text(fs::path(dir) / kIndexFile, index.dump(2) + "\n");
  }
  write_text(fs::path(dir) / kGenerationConfigFile, hf_generation_config_json(model));
  if (has_tokenizer_files(options.tokenizer_dir)) {
    copy_tokenizer_files(options.tokenizer_dir, dir);
    if (!fs::exists(fs::path(dir) / "tokenizer_config.json"))
      write_text(fs::path(dir) / "tokenizer_config.json", tokenizer_config_json(model));
  } else if (options.byte_level_tokenizer) {
    write_text(fs::path(dir) / "tokenizer.json", byte_level_tokenizer_json());
    write_text(fs::path(dir) / "tokenizer_config.json", tokenizer_config_json(model));
  }
  write_text(fs::path(dir) / kConfigFile, config_text);
}

HfModel read_hf_model(const std::string& dir_name) {
  const fs::path dir(dir_name);
  const fs::path config_path = dir / kConfigFile;
  HfModel out{parse_hf_config(read_text(config_path), config_path.string()), {}};
  const std::map<std::string, std::string> files = weight_files(dir);
  const fs::path index = dir / kIndexFile;

  // Every file once; each tensor must sit in the file the index names.
  std::map<std::string, TensorMap> loaded;
  std::set<std::string> file_names;
  for (const auto& [name, file] : files) file_names.insert(file);
  for (const std::string& file : file_names) {
    loaded[file] = read_safetensors((dir / file).string());
    for (const auto& [name, t] : loaded[file]) {
      if (ignored_tensor(name) || files.contains("")) continue;
      auto it = files.find(name);
      if (it == files.end() || it->second != file)
        H2_THROW(ConfigError, "{}: tensor '{}' is not listed for this file in {}",
                 (dir / file).string(), name, index.string());
    }
  }
  auto file_of = [&](const std::string& name) -> std::string {
    if (files.contains("")) return kSingleFile;
    auto it = files.find(name);
    return it == files.end() ? std::string() : it->second;
  };

  // The layer count is checked against the tensors present before anything is built from it (a
  // config claiming 1e9 layers would otherwise list 9e9 tensor names first; a layer has several
  // tensors, so a count above the tensors present cannot be right, and below it the checks that
  // follow name the missing tensor); every other size is checked against the tensors' shapes,
  // which the files on disk bound.
  size_t present = 0;
  for (const auto& [file, tensors] : loaded) present += tensors.size();
  if (uint64_t(out.config.model.n_layers) > present)
    H2_THROW(ConfigError,
             "{}: num_hidden_layers {} is more than the {} tensors the folder holds (a layer has "
             "several)",
             config_path.string(), out.config.model.n_layers, present);

  std::set<std::string> expected;
  for (const HfTensorSpec& spec : hf_tensor_specs(out.config.model)) {
    expected.insert(spec.name);
    std::string file = file_of(spec.name);
    if (file.empty())
      H2_THROW(ConfigError, "{}: no entry for tensor '{}' in weight_map", index.string(),
               spec.name);
    std::string where = (dir / file).string();
    auto it = loaded[file].find(spec.name);
    if (it == loaded[file].end())
      H2_THROW(ConfigError, "{}: no tensor '{}' (the model in {} needs it)", where, spec.name,
               config_path.string());
    if (!(it->second.shape == spec.shape))
      H2_THROW(ConfigError, "{}: tensor '{}' is {} but {} implies {}", where, spec.name,
               it->second.shape.str(), config_path.string(), spec.shape.str());
    out.tensors.emplace(spec.name, to_f32(it->second, where + ": tensor '" + spec.name + "'"));
  }
  for (auto& [file, tensors] : loaded)
    for (const auto& [name, t] : tensors) {
      if (expected.contains(name) || ignored_tensor(name)) continue;
      std::string where = (dir / file).string();
      if (name == "lm_head.weight" && out.config.model.tie_embeddings) {
        const StoredTensor head = to_f32(t, where + ": tensor 'lm_head.weight'");
        if (head.shape == out.tensors["model.embed_tokens.weight"].shape &&
            head.bytes == out.tensors["model.embed_tokens.weight"].bytes)
          continue;
        H2_THROW(ConfigError,
                 "{}: tensor 'lm_head.weight' differs from model.embed_tokens.weight although "
                 "{} sets tie_word_embeddings",
                 where, config_path.string());
      }
      H2_THROW(ConfigError, "{}: unexpected tensor '{}' for the model in {}", where, name,
               config_path.string());
    }
  return out;
}

bool is_hf_model_dir(const std::string& dir) {
  return fs::exists(fs::path(dir) / kConfigFile);
}

}  // namespace h2::checkpoint
