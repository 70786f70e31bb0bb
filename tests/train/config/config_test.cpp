// Loading, defaults, --set overrides, help and dump round-trip of the training configuration.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/train/config/test_util.h"
#include "train/config/config.h"
#include "train/config/keys.h"

namespace h2::config {
namespace {

using test::TempDir;

std::string full_yaml(const std::string& data_path) {
  return R"(# every section
model:
  vocab_size: 512
  dim: 256
  n_layers: 6
  n_heads: 8
  n_kv_heads: 2
  ffn_dim: 688
  seq_len: 256
  rope_theta: 500000.0
  norm_eps: 1.0e-6
  tie_embeddings: false
  rope_scaling_factor: 8
  rope_low_freq_factor: 1
  rope_high_freq_factor: 4
  rope_original_max_positions: 8192
  bos_token_id: 1
  eos_token_id: 2
  pad_token_id: 0
train:
  batch_size: 4
  grad_accum: 2
  steps: 500
  lr: 3e-4
  min_lr: 3e-5
  warmup_steps: 50
  weight_decay: 0.05
  grad_clip: 0.5
  seed: 7
  dtype: bf16
  device: "vchip:chip-a"
  eval_every: 25
  eval_batches: 4
data:
  path: )" +
         data_path +
         R"(
  format: bin
  val_path: [)" +
         data_path + ", " + data_path + R"(]
  val_fraction: 0.05
log:
  every: 5
  metrics_file: out/metrics.jsonl
  trace_file: out/trace.json
parallel:
  mode: pipeline
  bucket_mb: 4.5
  schedule: interleaved-1f1b
  chunks: 2
  lead: 1
  overlap: false
  segment_kb: 64
  stage_layers: "3,3"
  stage_ranks: "2,1"
  fsdp: true
  gather_group: 2
  replicas: 3
  recompute: true
  memory_check: false
  plan: plans/mixed.yaml
  profiles: cache/profiles
  wire_dtype: bf16
cluster:
  file: clusters/mixed.yaml
  devices: "vchip:chip-a,cpu"
precision:
  recipe: fp8_blockwise
  modules: "layers.*.mlp=nvfp4"
  keep_first: 1
  keep_last: 1
  keep_recipe: bf16
  target_after: 0.75
  target_recipe: compute
  target_modules: "layers.*.mlp"
  mx_scale: ceil
  delayed_history: 16
  delayed_margin: 1
checkpoint:
  dir: out/ckpt
  every: 100
  keep_last: 2
  resume: true
  async: true
)";
}

TEST(ConfigTest, LoadsEveryKeyFromYaml) {
  TempDir dir;
  std::string data = dir.write("tokens.bin", "x");
  std::string cfg_path = dir.write("full.yaml", full_yaml(data));
  TrainConfig c = load_config(cfg_path);
  EXPECT_EQ(c.model.vocab_size, 512);
  EXPECT_EQ(c.model.dim, 256);
  EXPECT_EQ(c.model.n_layers, 6);
  EXPECT_EQ(c.model.n_heads, 8);
  EXPECT_EQ(c.model.n_kv_heads, 2);
  EXPECT_EQ(c.model.ffn_dim, 688);
  EXPECT_EQ(c.model.seq_len, 256);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.model.norm_eps, 1e-6);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(c.model.rope_scaling_factor, 8);
  EXPECT_EQ(c.model.rope_low_freq_factor, 1);
  EXPECT_EQ(c.model.rope_high_freq_factor, 4);
  EXPECT_EQ(c.model.rope_original_max_positions, 8192);
  EXPECT_EQ(c.model.bos_token_id, 1);
  EXPECT_EQ(c.model.eos_token_id, 2);
  EXPECT_EQ(c.model.pad_token_id, 0);
  EXPECT_EQ(c.train.batch_size, 4);
  EXPECT_EQ(c.train.grad_accum, 2);
  EXPECT_EQ(c.train.steps, 500);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.train.min_lr, 3e-5);
  EXPECT_EQ(c.train.warmup_steps, 50);
  EXPECT_DOUBLE_EQ(c.train.weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(c.train.grad_clip, 0.5);
  EXPECT_EQ(c.train.seed, 7);
  EXPECT_EQ(c.train.dtype, DType::bf16);
  EXPECT_EQ(c.train.device, "vchip:chip-a");
  EXPECT_EQ(c.train.eval_every, 25);
  EXPECT_EQ(c.train.eval_batches, 4);
  EXPECT_EQ(c.data.path, data);
  EXPECT_EQ(c.data.format, DataFormat::bin);
  EXPECT_EQ(c.data.val_path, data + "," + data) << "a YAML list is the comma-separated form";
  EXPECT_DOUBLE_EQ(c.data.val_fraction, 0.05);
  EXPECT_EQ(c.log.every, 5);
  EXPECT_EQ(c.log.metrics_file, "out/metrics.jsonl");
  EXPECT_EQ(c.log.trace_file, "out/trace.json");
  EXPECT_EQ(c.parallel.mode, ParallelMode::pipeline);
  EXPECT_DOUBLE_EQ(c.parallel.bucket_mb, 4.5);
  EXPECT_EQ(c.parallel.schedule, ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(c.parallel.chunks, 2);
  EXPECT_EQ(c.parallel.lead, 1);
  EXPECT_FALSE(c.parallel.overlap);
  EXPECT_EQ(c.parallel.segment_kb, 64);
  EXPECT_EQ(c.parallel.stage_layers, "3,3");
  EXPECT_EQ(c.parallel.stage_ranks, "2,1");
  EXPECT_TRUE(c.parallel.fsdp);
  EXPECT_EQ(c.parallel.gather_group, 2);
  EXPECT_EQ(c.parallel.replicas, 3);
  EXPECT_TRUE(c.parallel.recompute);
  EXPECT_FALSE(c.parallel.memory_check);
  EXPECT_EQ(c.parallel.plan, "plans/mixed.yaml");
  EXPECT_EQ(c.parallel.profiles, "cache/profiles");
  EXPECT_EQ(c.parallel.wire_dtype, WireDtype::bf16);
  EXPECT_EQ(c.cluster.file, "clusters/mixed.yaml");
  EXPECT_EQ(c.cluster.devices, "vchip:chip-a,cpu");
  EXPECT_EQ(device_for_rank(c, 0, 2), "vchip:chip-a");
  EXPECT_EQ(device_for_rank(c, 1, 2), "cpu");
  EXPECT_THROW(device_for_rank(c, 0, 3), ConfigError);
  EXPECT_EQ(c.precision.recipe, PrecisionName::fp8_blockwise);
  EXPECT_EQ(c.precision.modules, "layers.*.mlp=nvfp4");
  EXPECT_EQ(c.precision.keep_first, 1);
  EXPECT_EQ(c.precision.keep_last, 1);
  EXPECT_EQ(c.precision.keep_recipe, PrecisionName::bf16);
  EXPECT_DOUBLE_EQ(c.precision.target_after, 0.75);
  EXPECT_EQ(c.precision.target_recipe, PrecisionName::compute);
  EXPECT_EQ(c.precision.target_modules, "layers.*.mlp");
  EXPECT_EQ(c.precision.mx_scale, MxScaleRule::ceil);
  EXPECT_EQ(c.precision.delayed_history, 16);
  EXPECT_EQ(c.precision.delayed_margin, 1);
  EXPECT_EQ(c.checkpoint.dir, "out/ckpt");
  EXPECT_EQ(c.checkpoint.every, 100);
  EXPECT_EQ(c.checkpoint.keep_last, 2);
  EXPECT_TRUE(c.checkpoint.resume);
  EXPECT_TRUE(c.checkpoint.async);
  EXPECT_EQ(c.origin_of("model.dim"), cfg_path + ":4");
  EXPECT_EQ(c.origin.size(), keys().size());
}

TEST(ConfigTest, MissingKeysKeepDefaults) {
  TempDir dir;
  std::string data = dir.write("d.txt", "hello");
  TrainConfig c = load_config(dir.write("min.yaml", "data:\n  path: " + data + "\n"));
  TrainConfig defaults;
  defaults.data.path = data;
  EXPECT_EQ(c, defaults);
  EXPECT_EQ(c.model.dim, 128);
  EXPECT_EQ(c.train.dtype, DType::f32);
  EXPECT_EQ(c.train.device, "cpu");
  EXPECT_EQ(c.data.format, DataFormat::text);
  EXPECT_EQ(c.origin_of("train.lr"), "default");
  // The defaults themselves are a valid configuration apart from the data file.
  EXPECT_NO_THROW(validate(TrainConfig{}, {.check_files = false}));
  // An empty document is all defaults.
  EXPECT_EQ(parse_yaml("", "empty.yaml"), TrainConfig{});
}

TEST(ConfigTest, OverridesOfEveryType) {
  TempDir dir;
  std::string data = dir.write("d.txt", "hello");
  std::string cfg = dir.write("c.yaml", "data:\n  path: " + data + "\ntrain:\n  steps: 10\n");
  std::vector<std::string> sets = {
      "train.steps=20",      "train.lr=2.5e-4",  "model.tie_embeddings=false",
      "train.device=cuda:1", "train.dtype=bf16", "log.metrics_file=m.jsonl",
      "train.steps=30"};
  TrainConfig c = load_config(cfg, sets);
  EXPECT_EQ(c.train.steps, 30);  // later --set wins over earlier and over the file
  EXPECT_DOUBLE_EQ(c.train.lr, 2.5e-4);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(c.train.device, "cuda:1");
  EXPECT_EQ(c.train.dtype, DType::bf16);
  EXPECT_EQ(c.log.metrics_file, "m.jsonl");
  EXPECT_EQ(c.origin_of("train.steps"), "--set");
  // A value may itself contain '='; an empty string value is allowed for string keys.
  apply_override(c, "log.trace_file=a=b.json");
  EXPECT_EQ(c.log.trace_file, "a=b.json");
  apply_override(c, "log.trace_file=");
  EXPECT_EQ(c.log.trace_file, "");
}

TEST(ConfigTest, HelpTableListsEveryKey) {
  std::string help = help_table();
  EXPECT_NE(help.find("key"), std::string::npos);
  EXPECT_NE(help.find("default"), std::string::npos);
  EXPECT_NE(help.find("meaning"), std::string::npos);
  std::map<std::string, std::string> lines;  // first word -> whole line
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) lines[line.substr(0, line.find(' '))] = line;
  for (const KeyInfo& key : keys()) {
    ASSERT_TRUE(lines.count(std::string(key.name))) << key.name;
    EXPECT_NE(lines[std::string(key.name)].find(key.help), std::string::npos) << key.name;
  }
  EXPECT_NE(help.find("f32|bf16"), std::string::npos);
  EXPECT_NE(help.find("in [0, 1)"), std::string::npos);
  // Every section of the contract is present.
  for (const char* s : {"model.", "train.", "data.", "log.", "checkpoint."})
    EXPECT_NE(help.find(s), std::string::npos) << s;
}

TEST(ConfigTest, DumpLoadRoundTrip) {
  TempDir dir;
  std::string data = dir.write("tokens.bin", "x");
  TrainConfig c = load_config(
      dir.write("full.yaml", full_yaml(data)),
      std::vector<std::string>{"train.lr=0.1234567890123", "log.trace_file=we\"ird \\ name: #x"});
  std::string dumped = dir.path("effective.yaml");
  write_yaml(c, dumped);
  TrainConfig back = load_config(dumped);
  EXPECT_EQ(back, c);
  EXPECT_EQ(back.log.trace_file, "we\"ird \\ name: #x");
  // Defaults round-trip too (empty strings, exact doubles).
  TrainConfig defaults;
  EXPECT_EQ(parse_yaml(dump_yaml(defaults), "dump"), defaults);
}

TEST(ConfigTest, KeyTableIsConsistent) {
  for (const KeyInfo& key : keys()) {
    EXPECT_EQ(find_key(key.name), &key);
    EXPECT_TRUE(is_section(key.section()));
    EXPECT_FALSE(key.help.empty()) << key.name;
  }
  EXPECT_EQ(find_key("train.nope"), nullptr);
  EXPECT_EQ(closest_key("train.stpes"), "train.steps");
  EXPECT_EQ(closest_key("train.seq_len"), "model.seq_len");
  EXPECT_EQ(closest_key("zzzzzzzzzz"), "");
}

}  // namespace
}  // namespace h2::config
