// Hugging Face model folders: config.json fields, the tensor list against models::Llama, sharding
// with an index, bit-identical round trips (f32 and bf16), tied and untied heads, bf16
// round-to-nearest-even on hand-picked bit patterns, and errors that name the file and tensor.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "backends/registry.h"
#include "core/error.h"
#include "models/llama.h"
#include "tests/train/data/temp_dir.h"
#include "train/checkpoint/hf_format.h"
#include "train/trainer.h"

namespace h2::checkpoint {
namespace {
namespace fs = std::filesystem;
using data::testing::TempDir;

// Small, with grouped-query attention (4 query heads share 2 key/value heads).
config::ModelConfig small_model(bool tied) {
  config::ModelConfig m;
  m.vocab_size = 16;
  m.dim = 8;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.ffn_dim = 12;
  m.seq_len = 8;
  m.rope_theta = 500000;
  m.norm_eps = 1e-6;
  m.tie_embeddings = tied;
  return m;
}

StoredTensor f32_tensor(const Shape& shape, const std::vector<float>& values) {
  StoredTensor t{DType::f32, shape, std::vector<std::byte>(values.size() * 4)};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// Random FP32 weights for every tensor the model has (bits with all 32 significant).
TensorMap random_weights(const config::ModelConfig& m, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 0.5f);
  TensorMap out;
  for (const HfTensorSpec& spec : hf_tensor_specs(m)) {
    std::vector<float> values(size_t(spec.shape.numel()));
    for (float& v : values) v = normal(rng);
    out[spec.name] = f32_tensor(spec.shape, values);
  }
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(read_file(path));
}

// Every file of `a` and `b` (names and bytes) identical.
void expect_same_files(const fs::path& a, const fs::path& b) {
  std::set<std::string> names_a, names_b;
  for (const auto& e : fs::directory_iterator(a)) names_a.insert(e.path().filename().string());
  for (const auto& e : fs::directory_iterator(b)) names_b.insert(e.path().filename().string());
  EXPECT_EQ(names_a, names_b);
  for (const std::string& name : names_a)
    EXPECT_TRUE(read_file(a / name) == read_file(b / name)) << name << " differs";
}

// Runs f, expecting a ConfigError whose message holds every fragment.
template <typename F>
void expect_config_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError; expected one mentioning " << fragments.front();
  } catch (const ConfigError& e) {
    for (const std::string& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "'" << fragment << "' missing from: " << e.what();
  }
}

TEST(HfFormat, ConfigJsonHasEveryLlamaField) {
  config::ModelConfig m = small_model(false);
  nlohmann::json j = nlohmann::json::parse(hf_config_json(m, DType::bf16));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["vocab_size"], 16);
  EXPECT_EQ(j["hidden_size"], 8);
  EXPECT_EQ(j["intermediate_size"], 12);
  EXPECT_EQ(j["num_hidden_layers"], 2);
  EXPECT_EQ(j["num_attention_heads"], 4);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["head_dim"], 2);
  EXPECT_EQ(j["max_position_embeddings"], 8);
  EXPECT_EQ(j["rope_theta"].get<double>(), 500000.0);
  EXPECT_EQ(j["rms_norm_eps"].get<double>(), 1e-6);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["dtype"], "bfloat16");  // transformers 5's name (torch_dtype before)
  EXPECT_EQ(j["rope_parameters"]["rope_type"], "default");
  EXPECT_EQ(j["rope_parameters"]["rope_theta"].get<double>(), 500000.0);
  EXPECT_TRUE(j["rope_scaling"].is_null());
  EXPECT_TRUE(j["bos_token_id"].is_null());
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(j["mlp_bias"], false);
  EXPECT_EQ(nlohmann::json::parse(hf_config_json(m, DType::f32))["dtype"], "float32");

  HfConfig back = parse_hf_config(hf_config_json(m, DType::bf16), "config.json");
  EXPECT_EQ(back.model, m);

  // Llama 3: its RoPE scaling and special tokens survive the round trip.
  m.rope_scaling_factor = 8;
  m.rope_low_freq_factor = 1;
  m.rope_high_freq_factor = 4;
  m.rope_original_max_positions = 8192;
  m.bos_token_id = 1;
  m.eos_token_id = 2;
  j = nlohmann::json::parse(hf_config_json(m, DType::f32));
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    EXPECT_EQ(j[key]["rope_type"], "llama3") << key;
    EXPECT_EQ(j[key]["factor"].get<double>(), 8) << key;
    EXPECT_EQ(j[key]["original_max_position_embeddings"], 8192) << key;
  }
  EXPECT_EQ(j["eos_token_id"], 2);
  EXPECT_EQ(parse_hf_config(j.dump(), "config.json").model, m);
  j["eos_token_id"] = {2, 7};  // Llama 3 instruct lists several end tokens: the first is kept
  EXPECT_EQ(parse_hf_config(j.dump(), "config.json").model.eos_token_id, 2);
  const nlohmann::json generation = nlohmann::json::parse(hf_generation_config_json(m));
  EXPECT_EQ(generation["bos_token_id"], 1);
  EXPECT_EQ(generation["eos_token_id"], 2);
  EXPECT_FALSE(generation.contains("pad_token_id"));
  EXPECT_EQ(back.dtype, DType::bf16);
}

TEST(HfFormat, RejectsConfigsH2CannotRepresent) {
  auto with = [](const std::string& key, nlohmann::json value) {
    nlohmann::json j = nlohmann::json::parse(hf_config_json(small_model(true), DType::f32));
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    return j.dump();
  };
  auto parse = [](const std::string& text) { parse_hf_config(text, "dir/config.json"); };
  expect_config_error([&] { parse(with("model_type", "mistral")); },
                      {"dir/config.json", "mistral"});
  expect_config_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}));
      },
      {"dir/config.json", "rope_scaling", "yarn", "llama3"});
  expect_config_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "llama3"}}));
      },
      {"dir/config.json", "malformed rotary settings", "factor"});
  expect_config_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "llama3"},
                                    {"factor", 8},
                                    {"low_freq_factor", 4},
                                    {"high_freq_factor", 1},
                                    {"original_max_position_embeddings", 8192}}));
      },
      {"dir/config.json", "low_freq_factor < high_freq_factor"});
  // A huge double where an integer belongs was cast to int64 with undefined behaviour (fuzz
  // finding hf_model-rope-positions-double, kept in fuzz/corpus/hf_model).
  expect_config_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "llama3"},
                                    {"factor", 8},
                                    {"low_freq_factor", 1},
                                    {"high_freq_factor", 4},
                                    {"original_max_position_embeddings", 8.191e22}}));
      },
      {"dir/config.json", "original_max_position_embeddings", "not an integer"});
  expect_config_error([&] { parse(with("eos_token_id", -2)); },
                      {"dir/config.json", "eos_token_id", "not a token id"});
  expect_config_error(
      [&] {
        parse(with("rope_parameters", {{"rope_type", "yarn"}}));
      },
      {"dir/config.json", "rope_parameters", "yarn"});
  expect_config_error(
      [&] {
        parse(with("rope_parameters", {{"rope_theta", 7.0}}));
      },
      {"dir/config.json", "rope_theta 500000 differs"});
  expect_config_error([&] { parse(with("hidden_size", nlohmann::json::value_t::discarded)); },
                      {"dir/config.json", "hidden_size"});
  expect_config_error([&] { parse(with("head_dim", 4)); }, {"dir/config.json", "head_dim 4"});
  expect_config_error([&] { parse(with("attention_bias", true)); }, {"attention_bias"});
  expect_config_error([&] { parse(with("hidden_act", "gelu")); }, {"gelu"});
  expect_config_error([&] { parse(with("num_key_value_heads", 3)); }, {"num_key_value_heads 3"});
  expect_config_error([&] { parse("{"); }, {"dir/config.json", "not JSON"});
  // Sizes are integers: JSON's 32.5 or 1e9 must not be truncated into a size.
  expect_config_error([&] { parse(with("hidden_size", 32.5)); },
                      {"dir/config.json", "hidden_size", "32.5", "wrong type"});
  expect_config_error([&] { parse(with("num_hidden_layers", 1e9)); },
                      {"num_hidden_layers", "wrong type"});
  expect_config_error([&] { parse(with("tie_word_embeddings", 1)); }, {"tie_word_embeddings"});
}

// transformers 5 writes the rotary base under rope_parameters and the dtype as "dtype".
TEST(HfFormat, ReadsTransformers5Configs) {
  nlohmann::json j = nlohmann::json::parse(hf_config_json(small_model(true), DType::f32));
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("dtype");
  j["rope_parameters"] = {{"rope_theta", 500.0}, {"rope_type", "default"}};
  j["dtype"] = "bfloat16";
  HfConfig parsed = parse_hf_config(j.dump(), "config.json");
  EXPECT_EQ(parsed.model.rope_theta, 500.0);
  EXPECT_EQ(parsed.dtype, DType::bf16);
  config::ModelConfig expected = small_model(true);
  expected.rope_theta = 500;
  EXPECT_EQ(parsed.model, expected);
}

TEST(HfFormat, TensorListIsTheModelsInHuggingFaceOrder) {
  auto runtime = create_runtime();
  for (bool tied : {true, false}) {
    config::ModelConfig m = small_model(tied);
    models::Llama model(train::llama_config(m), runtime->device("cpu"));
    auto params = model.named_parameters();
    auto specs = hf_tensor_specs(m);
    ASSERT_EQ(params.size(), specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(params[i].name, specs[i].name);
      EXPECT_EQ(params[i].param.shape(), specs[i].shape) << specs[i].name;
    }
    EXPECT_EQ(specs.back().name == "lm_head.weight", !tied);
  }
}

TEST(HfFormat, ShardsAtTheThresholdWithACompleteIndex) {
  TempDir dir;
  config::ModelConfig m = small_model(false);
  TensorMap weights = random_weights(m);
  write_hf_model(dir.file("hf"), m, weights, {.dtype = DType::f32, .max_shard_bytes = 400});
  const fs::path hf = dir.path() / "hf";
  EXPECT_FALSE(fs::exists(hf / "model.safetensors"));
  nlohmann::json index = read_json(hf / "model.safetensors.index.json");

  int64_t total = 0;
  for (const auto& [name, t] : weights) total += int64_t(t.bytes.size());
  EXPECT_EQ(index["metadata"]["total_size"], total);

  const auto& weight_map = index["weight_map"];
  EXPECT_EQ(weight_map.size(), weights.size());
  std::set<std::string> files;
  for (const auto& [name, file] : weight_map.items()) files.insert(file.get<std::string>());
  ASSERT_GT(files.size(), 2u);
  std::map<std::string, int> seen;
  size_t k = 0;
  for (const std::string& file : files) {
    EXPECT_EQ(file, fmt::format("model-{:05}-of-{:05}.safetensors", ++k, files.size()));
    int64_t file_bytes = 0;
    TensorMap shard = read_safetensors((hf / file).string());
    for (const auto& [name, t] : shard) {
      ++seen[name];
      EXPECT_EQ(weight_map.at(name), file) << name;
      EXPECT_EQ(t.bytes, weights.at(name).bytes) << name;
      file_bytes += int64_t(t.bytes.size());
    }
    // Whole tensors per shard; only a tensor larger than the threshold exceeds it, alone.
    EXPECT_TRUE(file_bytes <= 400 || shard.size() == 1) << file;
  }
  EXPECT_EQ(seen.size(), weights.size());
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;

  // Shards follow Hugging Face order: the embedding first, the head last.
  EXPECT_EQ(weight_map["model.embed_tokens.weight"], *files.begin());
  EXPECT_EQ(weight_map["lm_head.weight"], *files.rbegin());

  // Below the threshold: one file, no index; the earlier shards are gone.
  write_hf_model(dir.file("hf"), m, weights);
  EXPECT_TRUE(fs::exists(hf / "model.safetensors"));
  EXPECT_FALSE(fs::exists(hf / "model.safetensors.index.json"));
  EXPECT_EQ(std::distance(fs::directory_iterator(hf), fs::directory_iterator()), 3)
      << "config.json, generation_config.json, model.safetensors";
}

TEST(HfFormat, RoundTripIsBitIdentical) {
  TempDir dir;
  for (bool tied : {true, false})
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t shard : {int64_t(300), kDefaultHfShardBytes}) {
        SCOPED_TRACE(fmt::format("tied {} dtype {} shard {}", tied, dtype_name(dtype), shard));
        config::ModelConfig m = small_model(tied);
        TensorMap weights = random_weights(m, 7);
        fs::remove_all(dir.path());
        write_hf_model(dir.file("a"), m, weights, {.dtype = dtype, .max_shard_bytes = shard});
        HfModel back = read_hf_model(dir.file("a"));
        EXPECT_EQ(back.config.model, m);
        EXPECT_EQ(back.config.dtype, dtype);
        if (dtype == DType::f32) {
          for (const auto& [name, t] : weights) EXPECT_EQ(back.tensors.at(name).bytes, t.bytes);
        }
        write_hf_model(dir.file("b"), back.config.model, back.tensors,
                       {.dtype = dtype, .max_shard_bytes = shard});
        expect_same_files(dir.path() / "a", dir.path() / "b");
      }
}

// An imported model that came without tokenizer files (its kept folder empty) is exported with
// none, not with a byte-level one beside a larger vocabulary; and an export that writes no
// tokenizer leaves the user's own tokenizer files in place, --force or not.
TEST(HfFormat, NoTokenizerToWriteKeepsTheFoldersOwn) {
  TempDir dir;
  config::ModelConfig m = small_model(true);
  TensorMap weights = random_weights(m, 3);
  fs::create_directories(dir.path() / "kept");  // what h2 import leaves without tokenizer files
  write_hf_model(dir.file("out"), m, weights, {.tokenizer_dir = dir.file("kept")});
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "tokenizer_config.json"));
  std::ofstream(dir.path() / "out" / "tokenizer.json") << "{\"the user's\": 1}";
  write_hf_model(dir.file("out"), m, weights, {});
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "tokenizer.json"));
  write_hf_model(dir.file("out"), m, weights, {.byte_level_tokenizer = true});
  EXPECT_NE(read_file(dir.path() / "out" / "tokenizer.json").find("\"vocab\""), std::string::npos)
      << "an export that writes a tokenizer replaces the old one";
}

TEST(HfFormat, TiedModelsHaveNoHeadTensor) {
  TempDir dir;
  config::ModelConfig m = small_model(true);
  TensorMap weights = random_weights(m);
  EXPECT_FALSE(weights.contains("lm_head.weight"));
  write_hf_model(dir.file("hf"), m, weights);
  const std::string file = dir.file("hf/model.safetensors");
  EXPECT_FALSE(read_safetensors(file).contains("lm_head.weight"));
  EXPECT_TRUE(read_json(dir.path() / "hf/config.json")["tie_word_embeddings"]);

  // A head tensor equal to the embedding (as some tools write) is accepted; another is not.
  TensorMap with_head = read_safetensors(file);
  with_head["lm_head.weight"] = with_head["model.embed_tokens.weight"];
  write_safetensors(file, with_head);
  EXPECT_EQ(read_hf_model(dir.file("hf")).tensors.size(), weights.size());
  with_head["lm_head.weight"].bytes[0] ^= std::byte(1);
  write_safetensors(file, with_head);
  expect_config_error([&] { read_hf_model(dir.file("hf")); }, {file, "lm_head.weight"});

  // An untied model needs its head; writing one without it fails before any file is touched.
  config::ModelConfig untied = small_model(false);
  expect_config_error([&] { write_hf_model(dir.file("u"), untied, weights); }, {"lm_head.weight"});
}

TEST(HfFormat, Bf16RoundsToNearestEven) {
  // (f32 bits, bf16 bits) computed by hand: exact, ties to even (down and up), just above and
  // below a tie, overflow to infinity, subnormals, signed zero, infinities, NaN stays NaN.
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},
      {0x3f807fff, 0x3f80}, {0xbf818000, 0xbf82}, {0x7f7fffff, 0x7f80}, {0x7f7f7fff, 0x7f7f},
      {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x80000001, 0x8000}, {0x80000000, 0x8000},
      {0x7f800000, 0x7f80}, {0xff800000, 0xff80}, {0x4049ffff, 0x404a}, {0x40490fdb, 0x4049}};
  config::ModelConfig m = small_model(true);
  m.vocab_size = 2;  // embedding (2, 8) = 16 values
  ASSERT_EQ(cases.size(), 16u);
  TensorMap weights = random_weights(m);
  std::vector<float> values;
  for (auto [f, b] : cases) values.push_back(std::bit_cast<float>(f));
  weights["model.embed_tokens.weight"] = f32_tensor({2, 8}, values);
  TempDir dir;
  write_hf_model(dir.file("hf"), m, weights, {.dtype = DType::bf16});
  TensorMap stored = read_safetensors(dir.file("hf/model.safetensors"));
  const StoredTensor& emb = stored.at("model.embed_tokens.weight");
  ASSERT_EQ(emb.dtype, DType::bf16);
  for (size_t i = 0; i < cases.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, emb.bytes.data() + 2 * i, 2);
    EXPECT_EQ(bits, cases[i].second) << fmt::format("f32 {:#010x}", cases[i].first);
  }
  // NaN stays a NaN.
  weights["model.norm.weight"] =
      f32_tensor({8}, std::vector<float>(8, std::bit_cast<float>(0x7fc00001u)));
  write_hf_model(dir.file("hf"), m, weights, {.dtype = DType::bf16});
  stored = read_safetensors(dir.file("hf/model.safetensors"));
  const StoredTensor& norm = stored.at("model.norm.weight");
  uint16_t nan_bits;
  std::memcpy(&nan_bits, norm.bytes.data(), 2);
  EXPECT_EQ(nan_bits & 0x7f80, 0x7f80);
  EXPECT_NE(nan_bits & 0x007f, 0);
}

TEST(HfFormat, MissingOrMisshapenTensorsNameTheFileAndTensor) {
  TempDir dir;
  config::ModelConfig m = small_model(false);
  TensorMap weights = random_weights(m);
  const std::string k_proj = "model.layers.1.self_attn.k_proj.weight";

  // One file.
  write_hf_model(dir.file("one"), m, weights);
  const std::string one = dir.file("one/model.safetensors");
  TensorMap edited = weights;
  edited.erase(k_proj);
  write_safetensors(one, edited);
  expect_config_error([&] { read_hf_model(dir.file("one")); }, {one, k_proj, "no tensor"});
  edited = weights;
  edited[k_proj] = f32_tensor({8, 4}, std::vector<float>(32, 0.f));
  write_safetensors(one, edited);
  expect_config_error([&] { read_hf_model(dir.file("one")); }, {one, k_proj, "(8, 4)"});
  edited = weights;
  edited["model.layers.0.extra.weight"] = f32_tensor({1}, {0.f});
  write_safetensors(one, edited);
  expect_config_error([&] { read_hf_model(dir.file("one")); },
                      {one, "model.layers.0.extra.weight", "unexpected"});
  edited = weights;
  edited[k_proj].dtype = DType::i32;
  write_safetensors(one, edited);
  expect_config_error([&] { read_hf_model(dir.file("one")); }, {one, k_proj, "i32"});

  // Shards: the file the index names for the tensor.
  write_hf_model(dir.file("sharded"), m, weights, {.max_shard_bytes = 300});
  const fs::path sharded = dir.path() / "sharded";
  std::string file = read_json(sharded / "model.safetensors.index.json")["weight_map"][k_proj];
  TensorMap shard = read_safetensors((sharded / file).string());
  shard.erase(k_proj);
  write_safetensors((sharded / file).string(), shard);
  expect_config_error([&] { read_hf_model(sharded.string()); },
                      {(sharded / file).string(), k_proj});
  fs::remove(sharded / file);
  expect_config_error([&] { read_hf_model(sharded.string()); }, {(sharded / file).string()});

  // An index may only name files inside the folder.
  nlohmann::json index = read_json(sharded / "model.safetensors.index.json");
  index["weight_map"][k_proj] = "../../../../etc/passwd";
  std::ofstream(sharded / "model.safetensors.index.json", std::ios::trunc) << index.dump();
  expect_config_error([&] { read_hf_model(sharded.string()); },
                      {"model.safetensors.index.json", "../../../../etc/passwd", "plain name"});

  // A layer count far beyond the tensors present is refused before anything is built from it
  // (it once allocated 5.7 GB of tensor names for 1e9 layers before failing).
  write_hf_model(dir.file("layers"), m, weights);
  nlohmann::json config = read_json(dir.path() / "layers/config.json");
  config["num_hidden_layers"] = 1000000000;
  std::ofstream(dir.path() / "layers/config.json", std::ios::trunc) << config.dump();
  expect_config_error([&] { read_hf_model(dir.file("layers")); },
                      {"config.json", "num_hidden_layers 1000000000", "tensors the folder holds"});

  // A folder without weights, and none at all.
  fs::create_directories(dir.path() / "empty");
  std::ofstream(dir.path() / "empty/config.json") << hf_config_json(m, DType::f32);
  expect_config_error([&] { read_hf_model(dir.file("empty")); }, {"model.safetensors"});
  expect_config_error([&] { read_hf_model(dir.file("nothing")); }, {"config.json"});
}

}  // namespace
}  // namespace h2::checkpoint
