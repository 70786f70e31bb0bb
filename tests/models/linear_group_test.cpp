// LinearGroup: the layers reading one input run as one GEMM exactly while they are in the compute
// dtype with their weights end to end, and both ways (fused, and one GEMM per layer) give the
// outputs, input gradient and weight gradients of a double-precision loop; deferred weight
// gradients wait for weight_backward in the fused path too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/lowp/recipe.h"
#include "core/tensor_host.h"
#include "models/layers/linear_group.h"
#include "tests/models/llama_reference.h"

namespace h2::test {
namespace {

constexpr int64_t kTokens = 37, kIn = 24;
const std::vector<int64_t> kOut = {16, 8, 8};  // q, k and v of 2 : 1 : 1 heads

std::vector<float> uniform(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Case {
  std::vector<std::vector<float>> w;  // (O_i, I) each
  std::vector<float> x;               // (N, I)
  std::vector<float> dy;              // (N, sum O): the layers' gradients side by side
  int64_t out_total = 0;
};

Case make_case() {
  std::mt19937_64 rng(7);
  Case c;
  for (int64_t o : kOut) c.w.push_back(uniform(rng, o * kIn)), c.out_total += o;
  c.x = uniform(rng, kTokens * kIn);
  c.dy = uniform(rng, kTokens * c.out_total);
  return c;
}

models::LinearGroup make_group(const Case& c, DType dtype) {
  Device& cpu = model_runtime().cpu();
  std::vector<nn::Param> weights;
  for (size_t i = 0; i < kOut.size(); ++i)
    weights.push_back({.name = "model.layers.0.proj" + std::to_string(i) + ".weight",
                       .value = tensor_from_floats(c.w[i], {kOut[i], kIn}, dtype, cpu),
                       .grad = Tensor::zeros({kOut[i], kIn}, DType::f32, cpu)});
  return models::LinearGroup(std::move(weights));
}

// Column block of layer i in a row of sum O values.
int64_t first_column(size_t i) {
  int64_t c = 0;
  for (size_t j = 0; j < i; ++j) c += kOut[j];
  return c;
}

double out_ref(const Case& c, size_t i, int64_t n, int64_t o) {
  double s = 0;
  for (int64_t k = 0; k < kIn; ++k)
    s += double(c.x[size_t(n * kIn + k)]) * c.w[i][size_t(o * kIn + k)];
  return s;
}

double dy_at(const Case& c, size_t i, int64_t n, int64_t o) {
  return c.dy[size_t(n * c.out_total + first_column(i) + o)];
}

double dx_ref(const Case& c, int64_t n, int64_t k) {
  double s = 0;
  for (size_t i = 0; i < kOut.size(); ++i)
    for (int64_t o = 0; o < kOut[i]; ++o) s += dy_at(c, i, n, o) * c.w[i][size_t(o * kIn + k)];
  return s;
}

double dw_ref(const Case& c, size_t i, int64_t o, int64_t k) {
  double s = 0;
  for (int64_t n = 0; n < kTokens; ++n) s += dy_at(c, i, n, o) * c.x[size_t(n * kIn + k)];
  return s;
}

// f32 sums of 24 to 37 terms below 1; bf16 inputs and outputs carry 2^-9 relative errors each.
double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-5 : 0.03;
}

void expect_outputs(const Case& c, const std::vector<std::vector<float>>& outs, DType dtype) {
  for (size_t i = 0; i < kOut.size(); ++i)
    for (int64_t n = 0; n < kTokens; ++n)
      for (int64_t o = 0; o < kOut[i]; ++o)
        ASSERT_NEAR(outs[i][size_t(n * kOut[i] + o)], out_ref(c, i, n, o), tolerance(dtype))
            << "layer " << i << " token " << n << " out " << o;
}

void expect_grads(const Case& c, models::LinearGroup& g, const Tensor& dx, DType dtype) {
  const std::vector<float> got = tensor_to_floats(dx);
  for (int64_t n = 0; n < kTokens; ++n)
    for (int64_t k = 0; k < kIn; ++k)
      ASSERT_NEAR(got[size_t(n * kIn + k)], dx_ref(c, n, k), tolerance(dtype)) << n << ", " << k;
  for (size_t i = 0; i < kOut.size(); ++i) {
    const std::vector<float> dw = tensor_to_floats(g[i].param().grad);
    for (int64_t o = 0; o < kOut[i]; ++o)
      for (int64_t k = 0; k < kIn; ++k)
        ASSERT_NEAR(dw[size_t(o * kIn + k)], dw_ref(c, i, o, k), tolerance(dtype))
            << "layer " << i << " dW " << o << ", " << k;
  }
}

// Layer i's block of a (N, sum O) host matrix, as its own (N, O_i) matrix.
std::vector<float> columns(const std::vector<float>& all, int64_t total, size_t i) {
  std::vector<float> out;
  for (int64_t n = 0; n < kTokens; ++n)
    for (int64_t o = 0; o < kOut[i]; ++o)
      out.push_back(all[size_t(n * total + first_column(i) + o)]);
  return out;
}

TEST(LinearGroup, FusesInTheComputeDtypeWhileTheWeightsLieEndToEnd) {
  const Case c = make_case();
  models::LinearGroup g = make_group(c, DType::f32);
  EXPECT_TRUE(g.fused());
  g[1].set_recipe(lowp::find_recipe("fp8_current"));
  EXPECT_FALSE(g.fused());  // per-layer scales: one GEMM per layer
  g[1].set_recipe(std::nullopt);
  EXPECT_TRUE(g.fused());
  g[2].param().value = g[2].param().value.to(DType::f32);  // a copy elsewhere
  EXPECT_FALSE(g.fused());
}

TEST(LinearGroup, FusedAndPerLayerGemmsMatchADoubleLoop) {
  const Case c = make_case();
  Device& cpu = model_runtime().cpu();
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = tensor_from_floats(c.x, {kTokens, kIn}, dtype, cpu);
    {
      models::LinearGroup g = make_group(c, dtype);
      ASSERT_TRUE(g.fused());
      Tensor out = Tensor::empty({kTokens, c.out_total}, dtype, cpu);
      g.forward(out, x);
      const std::vector<float> all = tensor_to_floats(out);
      expect_outputs(c,
                     {columns(all, c.out_total, 0), columns(all, c.out_total, 1),
                      columns(all, c.out_total, 2)},
                     dtype);
      Tensor dx = Tensor::empty({kTokens, kIn}, dtype, cpu);
      g.backward(dx, tensor_from_floats(c.dy, {kTokens, c.out_total}, dtype, cpu), x);
      expect_grads(c, g, dx, dtype);
    }
    {
      models::LinearGroup g = make_group(c, dtype);
      g[0].param().value = g[0].param().value.to(dtype);  // no longer end to end
      ASSERT_FALSE(g.fused());
      std::vector<Tensor> outs, dys;
      for (size_t i = 0; i < kOut.size(); ++i) {
        outs.push_back(Tensor::empty({kTokens, kOut[i]}, dtype, cpu));
        dys.push_back(
            tensor_from_floats(columns(c.dy, c.out_total, i), {kTokens, kOut[i]}, dtype, cpu));
      }
      g.forward({outs[0], outs[1], outs[2]}, x);
      expect_outputs(
          c, {tensor_to_floats(outs[0]), tensor_to_floats(outs[1]), tensor_to_floats(outs[2])},
          dtype);
      Tensor dx = Tensor::empty({kTokens, kIn}, dtype, cpu);
      g.backward(dx, {dys[0], dys[1], dys[2]}, x);
      expect_grads(c, g, dx, dtype);
    }
  }
}

TEST(LinearGroup, DeferredWeightGradientsWaitForWeightBackward) {
  const Case c = make_case();
  Device& cpu = model_runtime().cpu();
  models::LinearGroup g = make_group(c, DType::f32);
  for (size_t i = 0; i < g.size(); ++i) g[i].set_defer_weight_grad(true);
  const Tensor x = tensor_from_floats(c.x, {kTokens, kIn}, DType::f32, cpu);
  Tensor dx = Tensor::empty({kTokens, kIn}, DType::f32, cpu);
  g.backward(dx, tensor_from_floats(c.dy, {kTokens, c.out_total}, DType::f32, cpu), x);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].pending_weight_grads(), 1u);
    for (float v : tensor_to_floats(g[i].param().grad)) ASSERT_EQ(v, 0.0f);
  }
  g.weight_backward();
  expect_grads(c, g, dx, DType::f32);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i].pending_weight_grads(), 0u);
}

}  // namespace
}  // namespace h2::test
