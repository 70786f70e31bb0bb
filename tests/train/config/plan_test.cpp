// HeteroPP plan files: a plan sets the stage layout, the groups and every rank's chip; plans that
// skip or repeat layers or ranks, use ranks out of order or beyond the job, or split a batch
// unevenly are refused naming the file, line and values; the memory estimate counts every
// parameter and scales with the group and the stash.
#include <gtest/gtest.h>

#include "tests/train/config/test_util.h"
#include "train/config/plan.h"

namespace h2::config {
namespace {

using test::TempDir;

constexpr const char* kMixed = R"(# 4 ranks: a fast pair, then two slow chips
stages:
  - {layers: 0-2, chip: "vchip:chip-a", ranks: [0, 1]}
  - {layers: 3-3, chip: "vchip:chip-b", ranks: [2]}
  - {layers: [4, 5], chip: "vchip:chip-b", ranks: [3]}
)";

TrainConfig six_layers() {
  TrainConfig c;
  c.model.n_layers = 6;
  c.train.batch_size = 4;
  return c;
}

TEST(Plan, SetsTheLayoutTheGroupsAndTheChips) {
  TempDir dir;
  const std::string path = dir.write("plan.yaml", kMixed);
  TrainConfig c = six_layers();
  apply_plan(load_plan(path), c, 4);
  EXPECT_EQ(c.parallel.stage_layers, "3,1,2");
  EXPECT_EQ(c.parallel.stage_ranks, "2,1,1");
  EXPECT_EQ(c.cluster.devices, "vchip:chip-a,vchip:chip-a,vchip:chip-b,vchip:chip-b");
  EXPECT_EQ(c.origin_of("cluster.devices"), path);
  EXPECT_EQ(device_for_rank(c, 2, 4), "vchip:chip-b");
}

// apply_plan on a plan file holding `plan_text` must fail naming every part.
void expect_refused(const std::string& plan_text, int world,
                    std::initializer_list<std::string> parts) {
  TempDir dir;
  const std::string path = dir.write("plan.yaml", plan_text);
  TrainConfig c = six_layers();
  test::expect_config_error([&] { apply_plan(load_plan(path), c, world); }, parts);
}

TEST(Plan, RefusesBrokenPlansNamingWhere) {
  expect_refused(
      "stages:\n  - {layers: 0-2, chip: cpu, ranks: [0]}\n  - {layers: 4-5, chip: cpu, "
      "ranks: [1]}\n",
      2, {"plan.yaml:3", "layers 4-5", "layer 3"});
  expect_refused("stages:\n  - {layers: 0-5, chip: cpu, ranks: [1, 0]}\n", 2,
                 {"plan.yaml:2", "rank 1 where rank 0"});
  expect_refused("stages:\n  - {layers: 0-5, chip: cpu, ranks: [0, 1, 2]}\n", 2,
                 {"rank 2 does not exist", "2 ranks"});
  expect_refused("stages:\n  - {layers: 0-5, chip: cpu, ranks: [0]}\n", 2,
                 {"use 1 ranks", "the job has 2"});
  expect_refused("stages:\n  - {layers: 0-4, chip: cpu, ranks: [0]}\n", 1,
                 {"cover 5 blocks", "model.n_layers = 6"});
  expect_refused("stages:\n  - {layers: 0-5, chip: cpu, ranks: [0, 1, 2]}\n", 3,
                 {"batch_size = 4", "3 ranks"});
  expect_refused("stages:\n  - {layers: 0-5, chip: cpu, ranks: [0], speed: 2}\n", 1,
                 {"plan.yaml:2", "unknown stage key 'speed'"});
  expect_refused("stages: []\n", 1, {"non-empty 'stages'"});
  EXPECT_THROW(load_plan("/nonexistent/plan.yaml"), ConfigError);
}

// Guards the YAML shapes parse_plan did not expect, which escaped as YAML::BadSubscript or
// YAML::TypedBadConversion (fuzz findings plan_file-yaml-*): a stage that is a scalar, a list as a
// key of the plan or of a stage, a list as the chip. Each is a ConfigError naming the line.
TEST(Plan, YamlOfTheWrongShapeIsAConfigErrorNamingTheLine) {
  const std::string stage = "  - {layers: 0-5, chip: cpu, ranks: [0]}\n";
  expect_refused("stages: [1]\n", 1, {"plan.yaml:1", "a stage is a map", "not '1'"});
  expect_refused("? [replicas]\n: 1\nstages:\n" + stage, 1,
                 {"plan.yaml:1", "a plan key must be a plain name"});
  expect_refused("stages:\n  - {? [layers] : 0-5, chip: cpu, ranks: [0]}\n", 1,
                 {"plan.yaml:2", "a plan key must be a plain name"});
  expect_refused("stages:\n  - {layers: 0-5, chip: [x], ranks: [0]}\n", 1,
                 {"plan.yaml:2", "chip must be one device spec"});
  expect_refused(
      "stages:\n? - {layers: 0-1, chip: cpu, ranks: [0]}\n"
      "  - {layers: 3-3, chip: cpu, ralks: [1]}\n",
      1, {"plan.yaml:2", "a plan key must be a plain name"});
}

// Guards apply_plan's division by parallel.chunks: 'chunks: 4294967296' became 0 through int()
// and S % chunks raised SIGFPE (fuzz finding plan_file-chunks-div0). The file's value is out of
// the key's range; a config holding it is refused without dividing by zero.
TEST(Plan, ChunksBeyondIntAreRefusedNotDividedBy) {
  expect_refused(
      "chunks: 4294967296\nschedule: interleaved-1f1b\nstages:\n"
      "  - {layers: 0-5, chip: cpu, ranks: [0]}\n",
      1, {"plan.yaml:1", "parallel.chunks = 4294967296", "out of range"});
  TempDir dir;
  const std::string path =
      dir.write("plan.yaml", "stages:\n  - {layers: 0-5, chip: cpu, ranks: [0]}\n");
  TrainConfig c = six_layers();
  c.parallel.chunks = int64_t(1) << 32;
  test::expect_config_error([&] { apply_plan(load_plan(path), c, 1); },
                            {"go round the groups 4294967296 times"});
}

// Guards next_layer = last_layer + 1: 'layers: 0-2147483647' overflowed int (fuzz finding
// plan_file-layer-overflow). A stage past the model's last block is refused first.
TEST(Plan, LayersPastTheModelAreRefusedBeforeAnyArithmetic) {
  expect_refused(
      "stages:\n  - {layers: 0-2147483647, chip: cpu, ranks: [0]}\n"
      "  - {layers: 3-3, chip: cpu, ranks: [1]}\n",
      2, {"plan.yaml:2", "layers 0-2147483647", "past the model's last block 5"});
  expect_refused("stages:\n  - {layers: 0-6, chip: cpu, ranks: [0]}\n", 1,
                 {"layers 0-6", "model.n_layers = 6"});
}

TEST(Plan, MemoryEstimateCountsParametersAndScalesWithGroupAndStash) {
  TrainConfig c = six_layers();
  c.model.dim = 64;
  c.model.ffn_dim = 172;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 2;
  c.model.tie_embeddings = false;
  // Embedding V*C, per block 2 C^2 + 2 C kv + 3 C F + 2 C (kv = C / H * Hkv), norm C, head V*C.
  const int64_t C = 64, F = 172, V = 256, kv = 32;
  const int64_t block = 2 * C * C + 2 * C * kv + 3 * C * F + 2 * C;
  const MemoryEstimate whole = estimate_stage_memory(c, 0, 5, true, true, 1, 1);
  EXPECT_EQ(whole.parameters, V * C + 6 * block + C + V * C);
  const MemoryEstimate middle = estimate_stage_memory(c, 2, 3, false, false, 1, 1);
  EXPECT_EQ(middle.parameters, 2 * block);
  EXPECT_EQ(estimate_stage_memory(c, 2, 3, false, false, 1, 4).activation_bytes,
            4 * middle.activation_bytes);
  EXPECT_EQ(estimate_stage_memory(c, 2, 3, false, false, 2, 1).activation_bytes,
            middle.activation_bytes / 2);
  c.parallel.fsdp = true;
  EXPECT_LT(estimate_stage_memory(c, 2, 3, false, false, 4, 1).model_state_bytes,
            estimate_stage_memory(c, 2, 3, false, false, 1, 1).model_state_bytes);
}

// One estimate worked by hand, so that a dropped or mis-sized term cannot pass: V 256, C 64,
// F 172, 4 heads of which 2 for k/v (kv = 64 / 4 * 2 = 32), T 32, 4 rows, one rank, one micro-batch
// stashed, no FSDP.
//   per block: q, o 2 * 64 * 64 = 8,192; k, v 2 * 64 * 32 = 4,096; gate, up, down
//   3 * 64 * 172 = 33,024; two norms 128: 45,440 parameters
//   blocks 2-3: 90,880 parameters x (12 persistent + 4 in use) bytes = 1,454,080 bytes
//   activations per block and token: 6 * 64 + 2 * 32 + 3 * 172 = 964 elements and 4 f32
//   log-sum-exps; 4 x 32 = 128 tokens:
//     f32:  (964 * 4 + 16) * 2 blocks * 128 = 991,232 bytes
//     bf16: (964 * 2 + 16) * 2 blocks * 128 = 497,664 bytes
//   last stage, blocks 4-5, tied table held by the first stage: 90,880 + final norm 64 + its own
//   copy of the table 256 * 64 = 16,384 -> 107,328 parameters; the head keeps (64 + 2 * 256)
//   elements per token: f32 (7,744 + 2,304) * 128 = 1,286,144 bytes.
TEST(Plan, MemoryEstimateOfAWorkedExample) {
  TrainConfig c = six_layers();
  c.model.vocab_size = 256;
  c.model.dim = 64;
  c.model.ffn_dim = 172;
  c.model.n_heads = 4;
  c.model.n_kv_heads = 2;
  c.model.seq_len = 32;
  c.model.tie_embeddings = true;
  c.train.batch_size = 4;
  c.parallel.fsdp = false;

  const MemoryEstimate middle = estimate_stage_memory(c, 2, 3, false, false, 1, 1);
  EXPECT_EQ(middle.parameters, 90880);
  EXPECT_EQ(middle.model_state_bytes, 1454080);
  EXPECT_EQ(middle.activation_bytes, 991232);
  c.train.dtype = DType::bf16;
  EXPECT_EQ(estimate_stage_memory(c, 2, 3, false, false, 1, 1).activation_bytes, 497664);
  c.train.dtype = DType::f32;

  const MemoryEstimate last = estimate_stage_memory(c, 4, 5, false, true, 1, 1);
  EXPECT_EQ(last.parameters, 107328);
  EXPECT_EQ(last.activation_bytes, 1286144);
  // One stage holding both ends keeps one tied table: 6 blocks, the table once, the final norm.
  EXPECT_EQ(estimate_stage_memory(c, 0, 5, true, true, 1, 1).parameters, 6 * 45440 + 16384 + 64);
}

}  // namespace
}  // namespace h2::config
