// The precision section: the YAML map form of precision.modules, the policy it builds, and the
// errors for bad recipe names, rules and compute dtypes (naming key, value and FILE:LINE).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/train/config/test_util.h"
#include "train/config/config.h"

namespace h2::config {
namespace {

using test::expect_config_error;
using test::TempDir;

class PrecisionConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& yaml) {
    return dir_.write("p.yaml", "data:\n  path: " + data_ + "\n" + yaml);
  }
  TempDir dir_;
  std::string data_ = dir_.write("data.txt", "some text");
};

TEST_F(PrecisionConfigTest, ModulesAsAYamlMapKeepFileOrderAndBuildThePolicy) {
  const TrainConfig c = load_config(write(R"(train:
  dtype: bf16
  steps: 100
precision:
  recipe: fp8_blockwise
  modules:
    "layers.*.mlp": nvfp4
    "layers.*.self_attn.*_proj": fp8_blockwise
  keep_first: 1
  keep_last: 2
  target_after: 0.8
  target_recipe: bf16
  mx_scale: ceil
)"));
  EXPECT_EQ(c.precision.modules, "layers.*.mlp=nvfp4; layers.*.self_attn.*_proj=fp8_blockwise");
  const lowp::PrecisionPolicy p = precision_policy(c);
  ASSERT_EQ(p.rules.size(), 2u);
  EXPECT_EQ(p.rules[0].pattern, "layers.*.mlp");
  EXPECT_EQ(p.keep_last, 2);
  EXPECT_EQ(p.mx_rule, lowp::MxScaleRule::ceil);
  EXPECT_EQ(p.recipe_for("layers.1.mlp.up_proj", 1, 4, 0, 100), lowp::Precision::nvfp4);
  // target_recipe bf16 with train.dtype bf16: the compute dtype.
  EXPECT_EQ(p.recipe_for("layers.1.mlp.up_proj", 1, 4, 80, 100), lowp::Precision::compute);
  EXPECT_EQ(p.options.seed, uint64_t(c.train.seed));
}

TEST_F(PrecisionConfigTest, TheStringFormWorksFromTheCommandLine) {
  const TrainConfig c = load_config(
      write(""), std::vector<std::string>{"precision.modules=layers.0.mlp=mxfp4;layers.1=mxfp8"});
  EXPECT_EQ(precision_policy(c).rules.size(), 2u);
}

TEST_F(PrecisionConfigTest, BadValuesAreNamedWithWhereTheyCameFrom) {
  expect_config_error([&] { load_config(write("precision:\n  recipe: fp8_blocks\n")); },
                      {"precision.recipe", "p.yaml:4", "'fp8_blocks'", "nvfp4"});
  expect_config_error(
      [&] { load_config(write("precision:\n  modules:\n    \"layers.*.mlp\": fp3\n")); },
      {"precision.modules", "p.yaml:4", "layers.*.mlp", "'fp3'"});
  expect_config_error([&] { load_config(write("precision:\n  target_recipe: bf16\n")); },
                      {"precision.target_recipe", "'bf16'", "train.dtype f32"});
  expect_config_error([&] { load_config(write("precision:\n  target_after: 1.5\n")); },
                      {"precision.target_after", "1.5"});
  expect_config_error([&] { load_config(write("precision:\n  mx_scale: up\n")); },
                      {"precision.mx_scale", "'up'"});
  expect_config_error(
      [&] { load_config(write(""), std::vector<std::string>{"precision.modules=x"}); },
      {"precision.modules (--set)", "'x'", "pattern=recipe"});
}

}  // namespace
}  // namespace h2::config
