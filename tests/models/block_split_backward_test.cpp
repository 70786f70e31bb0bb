// A decoder block's split backward (ZB-H1's I and W actions: set_defer_weight_grads, then
// weight_backward per micro-batch) under low-precision recipes: the same input gradients and
// weight gradients, bit for bit, as the whole backward, and no more quantizations of the layers'
// inputs (q, k and v share h^T, gate and up share theirs, in the W action as in the backward).
#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

#include "core/lowp/recipe.h"
#include "core/tensor_host.h"
#include "models/units.h"
#include "tests/models/llama_reference.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

constexpr int64_t kBatch = 2, kTokens = 32, kMicroBatches = 2;

struct Result {
  std::vector<std::vector<float>> input_grads, weight_grads;
  int64_t input_quantizations = 0;
};

Result run_block(std::string_view recipe, bool split) {
  Device& cpu = model_runtime().cpu();
  const models::LlamaConfig cfg = tiny_llama_config();
  models::BlockUnit block(0, cfg, /*seed=*/11, DType::f32, cpu, /*recompute=*/false);
  std::vector<models::Linear*> linears;
  block.collect_linears(linears);
  for (models::Linear* l : linears) l->set_recipe(lowp::find_recipe(recipe), {.seed = 5});
  block.set_defer_weight_grads(split);
  Result r;
  for (int64_t mb = 0; mb < kMicroBatches; ++mb) {
    const int64_t n = kBatch * kTokens * cfg.dim;
    std::mt19937_64 rng(uint64_t(100 + mb));
    const std::vector<float> xv = spread_values(rng, n);
    std::vector<float> dyv = spread_values(rng, n);
    for (float& v : dyv) v *= 0.01f;  // gradients far smaller than activations
    const Tensor x = tensor_from_floats(xv, {kBatch, kTokens, cfg.dim}, DType::f32, cpu);
    const Tensor dy = tensor_from_floats(dyv, {kBatch, kTokens, cfg.dim}, DType::f32, cpu);
    block.forward(x);
    r.input_grads.push_back(tensor_to_floats(block.backward(dy)));
  }
  if (split)
    for (int64_t mb = 0; mb < kMicroBatches; ++mb) block.weight_backward();
  std::vector<models::Param*> params;
  block.collect(params);
  for (models::Param* p : params)
    if (p->grad.defined()) r.weight_grads.push_back(tensor_to_floats(p->grad));
  for (models::Linear* l : linears) {
    EXPECT_EQ(l->pending_weight_grads(), 0u) << l->module();
    r.input_quantizations += l->input_quantizations();
  }
  return r;
}

TEST(BlockSplitBackward, EqualsTheWholeBackwardAndSharesTheInputsQuantizations) {
  // Per micro-batch: h (q, k, v), the attention's output (o), h (gate, up) and the SwiGLU's
  // output (down), each once as x and once as x^T.
  constexpr int64_t kPerMicroBatch = 8;
  for (const std::string_view recipe : {"fp8_current", "fp8_blockwise", "nvfp4", "mxfp4"}) {
    SCOPED_TRACE(recipe);
    const Result whole = run_block(recipe, false), split = run_block(recipe, true);
    EXPECT_EQ(whole.input_grads, split.input_grads);
    ASSERT_EQ(whole.weight_grads.size(), 9u);  // two norms and seven linears
    EXPECT_EQ(whole.weight_grads, split.weight_grads);
    EXPECT_EQ(whole.input_quantizations, kPerMicroBatch * kMicroBatches);
    EXPECT_EQ(split.input_quantizations, kPerMicroBatch * kMicroBatches);
  }
}

}  // namespace
}  // namespace h2::test
