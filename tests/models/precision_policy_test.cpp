// The precision policy: module patterns, rule parsing, resolution order (default, rules, kept
// first/last blocks, target switch) and recipe-name checks, against hand-worked cases.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/lowp/precision_policy.h"

namespace h2::test {
namespace {

using lowp::module_matches;
using lowp::Precision;
using lowp::PrecisionPolicy;

TEST(PrecisionPolicy, PatternsMatchWholeSegmentsOrDottedPrefixes) {
  EXPECT_TRUE(module_matches("layers.*.mlp", "layers.3.mlp.down_proj"));
  EXPECT_TRUE(module_matches("layers.*.mlp.down_proj", "layers.3.mlp.down_proj"));
  EXPECT_FALSE(module_matches("layers.*.mlp", "layers.3.self_attn.q_proj"));
  EXPECT_TRUE(module_matches("layers.*.self_attn.*_proj", "layers.0.self_attn.q_proj"));
  EXPECT_FALSE(module_matches("layers.*.self_attn.*_proj", "layers.0.mlp.up_proj"));
  EXPECT_TRUE(module_matches("*", "layers.12.mlp.gate_proj"));
  EXPECT_FALSE(module_matches("layers.1", "layers.10.mlp.gate_proj")) << "segment boundary";
  EXPECT_TRUE(module_matches("layers.1", "layers.1.mlp.gate_proj"));
  EXPECT_FALSE(module_matches("layers.*", "layers")) << "'*' needs a segment to match";
  EXPECT_TRUE(module_matches("embedding, layers.2.mlp", "layers.2.mlp.up_proj")) << "a list";
  EXPECT_FALSE(module_matches("", "layers.2.mlp.up_proj"));
}

TEST(PrecisionPolicy, RulesParseInOrderAndBadPiecesAreNamed) {
  const auto rules = lowp::parse_precision_rules(" layers.*.mlp = nvfp4 ;layers.0.mlp=compute; ",
                                                 "precision.modules");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].pattern, "layers.*.mlp");
  EXPECT_EQ(rules[0].recipe, Precision::nvfp4);
  EXPECT_EQ(rules[1].pattern, "layers.0.mlp");
  EXPECT_EQ(rules[1].recipe, Precision::compute);
  EXPECT_TRUE(lowp::parse_precision_rules("", "k").empty());
  try {
    lowp::parse_precision_rules("layers.*.mlp nvfp4", "precision.modules (a.yaml:3)");
    FAIL() << "no '=' accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("precision.modules (a.yaml:3)"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'layers.*.mlp nvfp4'"), std::string::npos);
  }
  EXPECT_THROW(lowp::parse_precision_rules("=nvfp4", "k"), ConfigError);
}

TEST(PrecisionPolicy, ResolutionOrderDefaultRulesKeptBlocksThenTarget) {
  PrecisionPolicy p{
      .recipe = Precision::fp8_blockwise,
      .rules = {{"layers.*.mlp", Precision::nvfp4}, {"layers.*.mlp.down_proj", Precision::mxfp8}},
      .keep_first = 1,
      .keep_last = 1,
      .keep_recipe = Precision::compute,
      .target_after = 0.8,
      .target_recipe = Precision::fp8_current,
      .target_modules = "layers.*.mlp"};
  auto recipe_for = [&](std::string_view module, int64_t layer, int64_t L, int64_t step,
                        int64_t steps) {
    return lowp::precision_name(p.recipe_for(module, layer, L, step, steps));
  };
  const int64_t L = 4, steps = 10;
  EXPECT_EQ(recipe_for("layers.1.self_attn.q_proj", 1, L, 0, steps), "fp8_blockwise");
  EXPECT_EQ(recipe_for("layers.1.mlp.up_proj", 1, L, 0, steps), "nvfp4");
  EXPECT_EQ(recipe_for("layers.2.mlp.down_proj", 2, L, 0, steps), "mxfp8") << "later rule wins";
  EXPECT_EQ(recipe_for("layers.0.mlp.up_proj", 0, L, 0, steps), "compute") << "first kept";
  EXPECT_EQ(recipe_for("layers.3.self_attn.o_proj", 3, L, 0, steps), "compute") << "last kept";
  // ceil(0.8 * 10) = 8: steps 0..7 keep the recipe, 8 and 9 run the target.
  EXPECT_EQ(recipe_for("layers.1.mlp.up_proj", 1, L, 7, steps), "nvfp4");
  EXPECT_EQ(recipe_for("layers.1.mlp.up_proj", 1, L, 8, steps), "fp8_current");
  EXPECT_EQ(recipe_for("layers.1.self_attn.q_proj", 1, L, 9, steps), "fp8_blockwise")
      << "only target_modules switch";
  EXPECT_TRUE(p.any_low_precision());
  EXPECT_FALSE(PrecisionPolicy{}.any_low_precision());
  const PrecisionPolicy plain_rules{.rules = {{"*", Precision::compute}}};
  EXPECT_FALSE(plain_rules.any_low_precision());
}

TEST(PrecisionPolicy, RecipeNamesAreCheckedAgainstTheComputeDtype) {
  EXPECT_EQ(lowp::parse_gemm_precision("compute", "f32", "precision.recipe"), Precision::compute);
  EXPECT_EQ(lowp::parse_gemm_precision("bf16", "bf16", "precision.recipe"), Precision::compute);
  EXPECT_EQ(lowp::parse_gemm_precision("nvfp4", "bf16", "precision.recipe"), Precision::nvfp4);
  try {
    lowp::parse_gemm_precision("bf16", "f32", "precision.target_recipe (c.yaml:9)");
    FAIL() << "bf16 with an f32 compute dtype accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:9"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("train.dtype f32"), std::string::npos);
  }
  try {
    lowp::parse_gemm_precision("fp8_blocks", "f32", "precision.recipe");
    FAIL() << "unknown recipe accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'fp8_blocks'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fp8_blockwise"), std::string::npos) << "lists names";
  }
}

TEST(PrecisionPolicy, RecipesHaveTheDocumentedFormatsAndBlocks) {
  const lowp::Recipe bw = lowp::find_recipe("fp8_blockwise");
  EXPECT_EQ(bw.input.block_rows, 1);
  EXPECT_EQ(bw.input.block_cols, 128);
  EXPECT_EQ(bw.weight.block_rows, 128);
  EXPECT_EQ(bw.weight.block_cols, 128);
  EXPECT_EQ(bw.grad.element, lowp::Format::e4m3);
  const lowp::Recipe cur = lowp::find_recipe("fp8_current");
  EXPECT_EQ(cur.grad.element, lowp::Format::e5m2) << "hybrid: E5M2 gradients";
  EXPECT_EQ(cur.scaling, lowp::Scaling::current);
  EXPECT_EQ(lowp::find_recipe("fp8_delayed").scaling, lowp::Scaling::delayed);
  const lowp::Recipe nv = lowp::find_recipe("nvfp4");
  EXPECT_EQ(nv.input.rule, lowp::ScaleRule::nvfp4);
  EXPECT_EQ(nv.input.block_cols, 16);
  EXPECT_TRUE(nv.grad_stochastic);
  EXPECT_EQ(lowp::find_recipe("mxfp4").weight.rule, lowp::ScaleRule::e8m0_floor);
  EXPECT_EQ(lowp::find_recipe("mxfp4", lowp::MxScaleRule::ceil).weight.rule,
            lowp::ScaleRule::e8m0_ceil);
  EXPECT_EQ(lowp::find_recipe("mxfp8").input.block_cols, 32);
  EXPECT_THROW(lowp::find_recipe("fp6"), ConfigError);
}

}  // namespace
}  // namespace h2::test
