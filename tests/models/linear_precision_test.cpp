// Linear layers under low-precision recipes: the three GEMMs of fp8_blockwise against an
// independent reference (scalar E4M3 encoding of each 1x128 / 128x128 block, dequantized, then
// a double-precision matmul), the three GEMMs of every recipe against its operands quantized with
// the specs the recipe must use and dequantized in double, closeness to the unquantized layer,
// operand statistics, weight quantizations kept while frozen, and reproducible stochastic
// rounding of gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/lowp/formats.h"
#include "core/lowp/recipe.h"
#include "core/tensor_host.h"
#include "models/layers/linear.h"
#include "tests/models/llama_reference.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using Matrix = std::vector<float>;  // row-major
using At = std::function<float(int64_t r, int64_t k)>;

constexpr int64_t kN = 256, kI = 192, kO = 160;  // tokens, in, out: partial blocks everywhere

// Dequantized values of an (R, K) matrix under an E4M3 f32_amax spec with br x bc blocks,
// computed with the scalar reference encoder: m = 448 / amax, code = e4m3(x * m), value =
// decode(code) * (1 / m).
Matrix blockwise_e4m3(const At& at, int64_t R, int64_t K, int64_t br, int64_t bc) {
  Matrix out(size_t(R * K));
  for (int64_t r0 = 0; r0 < R; r0 += br)
    for (int64_t k0 = 0; k0 < K; k0 += bc) {
      const int64_t r1 = std::min(R, r0 + br), k1 = std::min(K, k0 + bc);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(at(r, k)));
      const float m = amax == 0 ? 1.0f : 448.0f / amax, s = amax == 0 ? 1.0f : 1.0f / m;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t k = k0; k < k1; ++k) {
          const uint8_t code = lowp::encode(lowp::Format::e4m3, at(r, k) * m);
          out[size_t(r * K + k)] = lowp::decode(lowp::Format::e4m3, code) * s;
        }
    }
  return out;
}

// (M, N) = a (M, K) . b (N, K)^T in double.
std::vector<double> gemm_nt(const Matrix& a, const Matrix& b, int64_t M, int64_t N, int64_t K) {
  std::vector<double> c(size_t(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(a[size_t(i * K + k)]) * b[size_t(j * K + k)];
      c[size_t(i * N + j)] = acc;
    }
  return c;
}

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return diff / scale;
}

Matrix random_matrix(int64_t n, uint64_t seed, float scale) {
  Matrix m(static_cast<size_t>(n));
  uint64_t s = seed;
  for (float& v : m) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = scale * (float(int64_t(s >> 40) % 2001 - 1000) / 1000.0f);
  }
  return m;
}

struct Fixture {
  Device& cpu = model_runtime().cpu();
  Matrix x = random_matrix(kN * kI, 1, 3.0f), dy = random_matrix(kN * kO, 2, 0.01f);
  models::Linear linear{models::make_param("model.layers.0.mlp.up_proj.weight", {kO, kI},
                                           models::Init::normal, 0.02f, 7, DType::f32, cpu)};
  Matrix w = tensor_to_floats(linear.param().value);
  Tensor xt = tensor_from_floats(x, {kN, kI}, DType::f32, cpu);
  Tensor dyt = tensor_from_floats(dy, {kN, kO}, DType::f32, cpu);
};

TEST(LinearPrecision, BlockwiseFp8GemmsMatchAnIndependentReference) {
  Fixture f;
  f.linear.set_recipe(lowp::find_recipe("fp8_blockwise"));
  EXPECT_EQ(f.linear.recipe_name(), "fp8_blockwise");
  EXPECT_EQ(f.linear.module(), "layers.0.mlp.up_proj");
  auto row_major = [](const Matrix& m, int64_t cols) {
    return [&m, cols](int64_t r, int64_t k) { return m[size_t(r * cols + k)]; };
  };
  auto transposed = [](const Matrix& m, int64_t cols) {  // element (r, k) of m^T
    return [&m, cols](int64_t r, int64_t k) { return m[size_t(k * cols + r)]; };
  };

  Tensor y = Tensor::empty({kN, kO}, DType::f32, f.cpu);
  f.linear.forward(y, f.xt);
  const auto y_ref = gemm_nt(blockwise_e4m3(row_major(f.x, kI), kN, kI, 1, 128),
                             blockwise_e4m3(row_major(f.w, kI), kO, kI, 128, 128), kN, kO, kI);
  EXPECT_LT(max_rel_diff(tensor_to_floats(y), y_ref), 1e-5);

  Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
  f.linear.backward(dx, f.dyt, f.xt);
  const auto dx_ref = gemm_nt(blockwise_e4m3(row_major(f.dy, kO), kN, kO, 1, 128),
                              blockwise_e4m3(transposed(f.w, kI), kI, kO, 128, 128), kN, kI, kO);
  EXPECT_LT(max_rel_diff(tensor_to_floats(dx), dx_ref), 1e-5);
  const auto dw_ref = gemm_nt(blockwise_e4m3(transposed(f.dy, kO), kO, kN, 1, 128),
                              blockwise_e4m3(transposed(f.x, kI), kI, kN, 1, 128), kO, kI, kN);
  EXPECT_LT(max_rel_diff(tensor_to_floats(f.linear.param().grad), dw_ref), 1e-5);

  const models::LinearStats s = f.linear.stats();
  EXPECT_EQ(s.x.amax, 3.0f) << "max |x| of the random matrix";
  EXPECT_EQ(s.x.saturated_fraction, 0.0) << "amax scaling never saturates";
}

// Every recipe's three GEMMs against an independent reference. Each operand is quantized with
// the spec the recipe must give it (written here from the table of core/lowp/recipe.h and
// docs/numerics.md, not read from the recipe), in the orientation its GEMM consumes (K
// contiguous: x and W for y, dy and W^T for dx, dy^T and x^T for dW), dequantized in double
// straight from the format definitions (tests/ops/lowp_test_util.h), and multiplied in double.
// A recipe that swapped the weight and gradient specs, blocked an operand along the wrong axis,
// reused the forward layout of x for the weight gradient or dropped a scale misses by far more
// than the FP32 accumulation's 1e-5. Stochastic rounding of gradients is switched off here (its
// own tests are below and in tests/ops/quantize_test.cpp); fp8_delayed's first step has no
// history, so it scales like fp8_current.
TEST(LinearPrecision, EveryRecipesGemmsMatchTheDequantizedOperandsMultipliedInDouble) {
  using lowp::Format;
  using lowp::MxScaleRule;
  using lowp::ScaleRule;
  struct Expected {
    const char* name;
    MxScaleRule mx_rule;
    lowp::QuantSpec input, weight, grad;
  };
  const lowp::QuantSpec e4m3_tensor = spec(Format::e4m3, ScaleRule::f32_amax, 0, 0);
  const lowp::QuantSpec e5m2_tensor = spec(Format::e5m2, ScaleRule::f32_amax, 0, 0);
  const lowp::QuantSpec tile = spec(Format::e4m3, ScaleRule::f32_amax, 1, 128);
  const lowp::QuantSpec block = spec(Format::e4m3, ScaleRule::f32_amax, 128, 128);
  auto mx = [](Format f, ScaleRule rule) { return spec(f, rule, 1, 32); };
  const lowp::QuantSpec nv = spec(Format::e2m1, ScaleRule::nvfp4, 1, 16);
  const std::vector<Expected> recipes = {
      {"fp8_current", MxScaleRule::floor, e4m3_tensor, e4m3_tensor, e5m2_tensor},
      {"fp8_delayed", MxScaleRule::floor, e4m3_tensor, e4m3_tensor, e5m2_tensor},
      {"fp8_blockwise", MxScaleRule::floor, tile, block, tile},
      {"mxfp8", MxScaleRule::floor, mx(Format::e4m3, ScaleRule::e8m0_floor),
       mx(Format::e4m3, ScaleRule::e8m0_floor), mx(Format::e4m3, ScaleRule::e8m0_floor)},
      {"mxfp8", MxScaleRule::ceil, mx(Format::e4m3, ScaleRule::e8m0_ceil),
       mx(Format::e4m3, ScaleRule::e8m0_ceil), mx(Format::e4m3, ScaleRule::e8m0_ceil)},
      {"mxfp4", MxScaleRule::floor, mx(Format::e2m1, ScaleRule::e8m0_floor),
       mx(Format::e2m1, ScaleRule::e8m0_floor), mx(Format::e2m1, ScaleRule::e8m0_floor)},
      {"mxfp4", MxScaleRule::ceil, mx(Format::e2m1, ScaleRule::e8m0_ceil),
       mx(Format::e2m1, ScaleRule::e8m0_ceil), mx(Format::e2m1, ScaleRule::e8m0_ceil)},
      {"nvfp4", MxScaleRule::floor, nv, nv, nv},
  };
  ASSERT_EQ(lowp::recipe_names().size(), 6u) << "a recipe without an expectation here";
  auto transpose = [](const Matrix& m, int64_t rows, int64_t cols) {
    Matrix t(m.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = m[size_t(r * cols + c)];
    return t;
  };
  for (const Expected& want : recipes) {
    SCOPED_TRACE(std::string(want.name) + (want.mx_rule == MxScaleRule::ceil ? " (ceil)" : ""));
    Fixture f;
    lowp::Recipe recipe = lowp::find_recipe(want.name, want.mx_rule);
    recipe.grad_stochastic = false;
    f.linear.set_recipe(recipe);
    // Quantized on the CPU with the expected spec, dequantized independently: (R, K) row-major.
    auto operand = [&](const Matrix& values, int64_t rows, int64_t cols, const lowp::QuantSpec& s) {
      return dequantize(to_host(quantize_values(f.cpu, values, rows, cols, s)));
    };
    auto relative = [](const std::vector<float>& got, const std::vector<double>& ref) {
      double diff = 0, scale = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
        scale = std::max(scale, std::fabs(ref[i]));
      }
      return diff / scale;
    };
    const Matrix wt = transpose(f.w, kO, kI), dyt = transpose(f.dy, kN, kO),
                 xt = transpose(f.x, kN, kI);

    Tensor y = Tensor::empty({kN, kO}, DType::f32, f.cpu);
    f.linear.forward(y, f.xt);
    const auto y_ref = reference_gemm(operand(f.x, kN, kI, want.input),
                                      operand(f.w, kO, kI, want.weight), {}, kN, kO, kI, 1, 0);
    EXPECT_LT(relative(tensor_to_floats(y), y_ref.out), 1e-5) << "forward y = x W^T";

    Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
    f.linear.backward(dx, f.dyt, f.xt);
    const auto dx_ref = reference_gemm(operand(f.dy, kN, kO, want.grad),
                                       operand(wt, kI, kO, want.weight), {}, kN, kI, kO, 1, 0);
    EXPECT_LT(relative(tensor_to_floats(dx), dx_ref.out), 1e-5) << "dgrad dx = dy W";
    const auto dw_ref = reference_gemm(operand(dyt, kO, kN, want.grad),
                                       operand(xt, kI, kN, want.input), {}, kO, kI, kN, 1, 0);
    EXPECT_LT(relative(tensor_to_floats(f.linear.param().grad), dw_ref.out), 1e-5)
        << "wgrad dW = dy^T x";
  }
}

TEST(LinearPrecision, QuantizedLayerIsCloseToButNotEqualToTheComputeDtypeLayer) {
  Fixture f;
  Tensor y_plain = Tensor::empty({kN, kO}, DType::f32, f.cpu);
  f.linear.forward(y_plain, f.xt);
  for (const char* name :
       {"fp8_current", "fp8_delayed", "fp8_blockwise", "mxfp8", "mxfp4", "nvfp4"}) {
    f.linear.set_recipe(lowp::find_recipe(name));
    Tensor y = Tensor::empty({kN, kO}, DType::f32, f.cpu);
    f.linear.forward(y, f.xt);
    const std::vector<float> plain = tensor_to_floats(y_plain), got = tensor_to_floats(y);
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (double(got[i]) - plain[i]) * (double(got[i]) - plain[i]);
      norm += double(plain[i]) * plain[i];
    }
    const double rel = std::sqrt(err / norm);
    const bool fp4 = std::string_view(name).find("fp4") != std::string_view::npos;
    EXPECT_GT(rel, 1e-4) << name << ": nothing was quantized";
    EXPECT_LT(rel, fp4 ? 0.25 : 0.06) << name;
  }
  f.linear.set_recipe(std::nullopt);
  Tensor y = Tensor::empty({kN, kO}, DType::f32, f.cpu);
  f.linear.forward(y, f.xt);
  EXPECT_EQ(tensor_to_floats(y), tensor_to_floats(y_plain)) << "back to the plain matmul";
}

// fp8_delayed: the first forward has no history and scales by its own amax (3); the second sees
// x four times larger but still scales by the history's amax 3, so every |x| above 3 * 464/448
// saturates, and the layer reports it.
TEST(LinearPrecision, DelayedScalingUsesTheHistoryAndReportsSaturation) {
  Fixture f;
  f.linear.set_recipe(lowp::find_recipe("fp8_delayed"), {.delayed_history = 4});
  Tensor y = Tensor::empty({kN, kO}, DType::f32, f.cpu);
  f.linear.forward(y, f.xt);
  EXPECT_EQ(f.linear.stats().x.saturated_fraction, 0.0);
  Matrix x4 = f.x;
  for (float& v : x4) v *= 4;
  f.linear.forward(y, tensor_from_floats(x4, {kN, kI}, DType::f32, f.cpu));
  int64_t beyond = 0;  // |4x| * 448 / 3 rounds past 448 when |4x| > 3 * 464 / 448
  for (float v : x4) beyond += std::fabs(v) * (448.0f / 3.0f) > 464.0f;
  const models::LinearStats s = f.linear.stats();
  EXPECT_EQ(s.x.amax, 12.0f);
  EXPECT_NEAR(s.x.saturated_fraction, double(beyond) / double(kN * kI), 1e-12);
  EXPECT_GT(s.x.saturated_fraction, 0.5);
}

// ZB-H1's split backward: dx at once, dy^T x later, oldest first; the gradients equal the
// unsplit backward's bit for bit, in the compute dtype and quantized.
// fp8_current's wgrad takes dy^T as dgrad's codes transposed, split or not (the queue keeps the
// codes): one quantization of dy per backward; the other recipes quantize dy^T anew, two.
TEST(LinearPrecision, DeferredWeightGradientsEqualTheUnsplitBackward) {
  const std::map<std::string_view, int64_t> grad_quantizations = {
      {"compute", 0}, {"fp8_current", 2}, {"fp8_blockwise", 4}, {"nvfp4", 4}};
  for (const auto& [recipe, quantizations] : grad_quantizations) {
    auto run = [&](bool split) {
      Fixture f;
      if (recipe != "compute") f.linear.set_recipe(lowp::find_recipe(recipe));
      Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
      Tensor dy2 =
          tensor_from_floats(random_matrix(kN * kO, 3, 0.02f), {kN, kO}, DType::f32, f.cpu);
      f.linear.set_defer_weight_grad(split);
      f.linear.backward(dx, f.dyt, f.xt);
      const std::vector<float> dx1 = tensor_to_floats(dx);
      f.linear.backward(dx, dy2, f.xt);
      if (split) {
        EXPECT_EQ(f.linear.pending_weight_grads(), 2u);
        EXPECT_EQ(tensor_to_floats(f.linear.param().grad), std::vector<float>(kO * kI, 0.0f))
            << "weight gradients must wait for weight_backward";
        f.linear.weight_backward();
        f.linear.weight_backward();
        EXPECT_THROW(f.linear.weight_backward(), Error);
      }
      EXPECT_EQ(f.linear.grad_quantizations(), quantizations) << recipe << " split " << split;
      const models::OperandStats dy = f.linear.stats().dy;
      return std::tuple{dx1, tensor_to_floats(f.linear.param().grad), dy.amax,
                        dy.saturated_fraction};
    };
    const auto whole = run(false), split = run(true);
    EXPECT_EQ(std::get<0>(whole), std::get<0>(split)) << recipe;
    EXPECT_EQ(std::get<1>(whole), std::get<1>(split)) << recipe;
    EXPECT_EQ(std::get<2>(whole), std::get<2>(split)) << recipe << ": dy's amax";
    EXPECT_EQ(std::get<3>(whole), std::get<3>(split)) << recipe << ": dy's saturated fraction";
  }
}

// A queued wgrad holds what its backward's recipe made (dy's codes): changing the recipe before
// weight_backward is refused, naming the layer.
TEST(LinearPrecision, RecipeChangeWithDeferredWeightGradientsIsRefused) {
  Fixture f;
  f.linear.set_recipe(lowp::find_recipe("fp8_current"));
  f.linear.set_defer_weight_grad(true);
  Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
  f.linear.backward(dx, f.dyt, f.xt);
  try {
    f.linear.set_recipe(std::nullopt);
    ADD_FAILURE() << "set_recipe with a deferred weight gradient must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 weight gradients deferred"), std::string::npos);
  }
  f.linear.weight_backward();
  f.linear.set_recipe(std::nullopt);
  EXPECT_EQ(f.linear.recipe_name(), "compute");
}

// Layers reading one input share its quantizations (SharedInput, as q/k/v and gate/up do), in
// the backward and in a split backward's weight gradients (weight_backward): the second layer's
// output, dx, weight gradient and statistics equal those it computes quantizing the input itself,
// bit for bit, and it quantizes the input no more; a spec the first layer did not use is
// quantized anew, and a layer reading another input is refused.
TEST(LinearPrecision, SharedInputQuantizationsEqualTheLayersOwn) {
  enum class Mode { own, shared, shared_split };
  for (const char* recipe : {"fp8_blockwise", "nvfp4", "mxfp8", "fp8_current"}) {
    SCOPED_TRACE(recipe);
    auto run = [&](Mode mode) {
      Fixture f;
      models::Linear second{models::make_param("model.layers.0.mlp.gate_proj.weight", {kO, kI},
                                               models::Init::normal, 0.02f, 7, DType::f32, f.cpu)};
      f.linear.set_recipe(lowp::find_recipe(recipe));
      second.set_recipe(lowp::find_recipe(recipe));
      const bool split = mode == Mode::shared_split;
      f.linear.set_defer_weight_grad(split);
      second.set_defer_weight_grad(split);
      models::SharedInput forward_shared, backward_shared, wgrad_shared;
      models::SharedInput* fs = mode == Mode::own ? nullptr : &forward_shared;
      models::SharedInput* bs = mode == Mode::own ? nullptr : &backward_shared;
      Tensor out1 = Tensor::empty({kN, kO}, DType::f32, f.cpu);
      Tensor out2 = Tensor::empty({kN, kO}, DType::f32, f.cpu);
      f.linear.forward(out1, f.xt, fs);
      second.forward(out2, f.xt, fs);
      Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
      f.linear.backward(dx, f.dyt, f.xt, false, bs);
      second.backward(dx, f.dyt, f.xt, true, bs);
      if (split) {
        f.linear.weight_backward(&wgrad_shared);
        second.weight_backward(&wgrad_shared);
      }
      EXPECT_EQ(f.linear.input_quantizations(), 2) << "x and x^T";
      const models::LinearStats stats = second.stats();
      return std::tuple{
          tensor_to_floats(out2), tensor_to_floats(dx),       tensor_to_floats(second.param().grad),
          stats.x.amax,           stats.x.saturated_fraction, second.input_quantizations()};
    };
    const auto own = run(Mode::own);
    EXPECT_EQ(std::get<5>(own), 2);
    for (const Mode mode : {Mode::shared, Mode::shared_split}) {
      SCOPED_TRACE(mode == Mode::shared ? "shared" : "shared, split backward");
      const auto shared = run(mode);
      EXPECT_EQ(std::get<0>(own), std::get<0>(shared)) << "output";
      EXPECT_EQ(std::get<1>(own), std::get<1>(shared)) << "dx";
      EXPECT_EQ(std::get<2>(own), std::get<2>(shared)) << "weight gradient";
      EXPECT_EQ(std::get<3>(own), std::get<3>(shared)) << "x amax";
      EXPECT_EQ(std::get<4>(own), std::get<4>(shared)) << "x saturated fraction";
      EXPECT_GT(std::get<3>(shared), 0.0f) << "the shared statistics were not copied";
      EXPECT_EQ(std::get<5>(shared), 0) << "the second layer quantized x itself";
    }
  }
  models::SharedInput shared;  // keyed by spec and orientation, checked against the input
  const lowp::Recipe blockwise = lowp::find_recipe("fp8_blockwise");
  Fixture f;
  const lowp::QTensor q = lowp::QTensor::empty(blockwise.input, kN, kI, f.cpu);
  shared.keep(blockwise.input, false, f.xt, q, Tensor::zeros({2}, DType::f32, f.cpu));
  EXPECT_NE(shared.find(blockwise.input, false, f.xt), nullptr);
  EXPECT_EQ(shared.find(blockwise.input, true, f.xt), nullptr);
  EXPECT_EQ(shared.find(blockwise.weight, false, f.xt), nullptr);
  const Tensor other = Tensor::empty({kN, kI}, DType::f32, f.cpu);
  EXPECT_THROW(shared.find(blockwise.input, false, other), Error);
}

// Three micro-batches through one layer, as a step with gradient accumulation runs them: with its
// weights frozen (set_weights_frozen), the layer quantizes W once per orientation for the step
// instead of once per micro-batch, and every output, dx and the accumulated weight gradient are
// the same bits. Delayed scaling records every quantization in its history, so it keeps none.
TEST(LinearPrecision, FrozenWeightsAreQuantizedOncePerOrientationWithTheSameBits) {
  constexpr int kMicroBatches = 3;
  for (const std::string_view recipe : lowp::recipe_names()) {
    SCOPED_TRACE(recipe);
    auto run = [&](bool frozen) {
      Fixture f;
      f.linear.set_recipe(lowp::find_recipe(recipe), {.seed = 3});
      f.linear.set_weights_frozen(frozen);
      std::vector<std::vector<float>> results;
      Tensor out = Tensor::empty({kN, kO}, DType::f32, f.cpu);
      Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
      for (int mb = 0; mb < kMicroBatches; ++mb) {
        const Tensor x =
            tensor_from_floats(random_matrix(kN * kI, 10 + mb, 3.0f), {kN, kI}, DType::f32, f.cpu);
        const Tensor dy =
            tensor_from_floats(random_matrix(kN * kO, 20 + mb, 0.01f), {kN, kO}, DType::f32, f.cpu);
        f.linear.forward(out, x);
        f.linear.backward(dx, dy, x);
        results.push_back(tensor_to_floats(out));
        results.push_back(tensor_to_floats(dx));
      }
      results.push_back(tensor_to_floats(f.linear.param().grad));
      return std::pair{results, f.linear.weight_quantizations()};
    };
    const auto [each, each_count] = run(false);
    const auto [kept, kept_count] = run(true);
    EXPECT_EQ(each, kept);
    if (lowp::find_recipe(recipe).scaling == lowp::Scaling::delayed) {
      EXPECT_EQ(kept_count, each_count);
    } else {
      EXPECT_EQ(kept_count * kMicroBatches, each_count);
      EXPECT_GE(kept_count, 1);
      EXPECT_LE(kept_count, 2);  // W, and W^T where it is not W's codes transposed
    }
  }
}

// Thawing drops what was kept: after the weights change (an optimizer step between two frozen
// scopes), the next forward and dgrad use the new weights, as a layer that never froze does
// (the same calls, so that stochastic rounding draws the same positions).
TEST(LinearPrecision, ThawingDropsTheKeptWeightQuantizations) {
  for (const char* recipe : {"fp8_blockwise", "nvfp4"}) {
    SCOPED_TRACE(recipe);
    auto run = [&](bool freeze) {
      Fixture f;
      f.linear.set_recipe(lowp::find_recipe(recipe));
      Tensor out = Tensor::empty({kN, kO}, DType::f32, f.cpu);
      Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
      std::vector<std::vector<float>> results;
      for (uint64_t step = 0; step < 2; ++step) {
        if (step == 1)  // what the optimizer does between the scopes
          f.linear.param().value.copy_from(
              tensor_from_floats(random_matrix(kO * kI, 99, 0.05f), {kO, kI}, DType::f32, f.cpu));
        f.linear.set_weights_frozen(freeze);
        f.linear.forward(out, f.xt);
        f.linear.backward(dx, f.dyt, f.xt);
        f.linear.set_weights_frozen(false);
        results.push_back(tensor_to_floats(out));
        results.push_back(tensor_to_floats(dx));
      }
      return results;
    };
    const auto kept = run(true), each = run(false);
    EXPECT_EQ(kept, each);
    EXPECT_NE(each[0], each[2]) << "the changed weights changed nothing";
  }
}

TEST(LinearPrecision, StochasticGradientRoundingIsReproducibleForASeed) {
  auto grads = [](uint64_t seed) {
    Fixture f;
    f.linear.set_recipe(lowp::find_recipe("nvfp4"), {.seed = seed});
    Tensor dx = Tensor::empty({kN, kI}, DType::f32, f.cpu);
    f.linear.backward(dx, f.dyt, f.xt);
    f.linear.backward(dx, f.dyt, f.xt);  // a second micro-batch: fresh random positions
    return tensor_to_floats(f.linear.param().grad);
  };
  const std::vector<float> a = grads(5), b = grads(5), c = grads(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace h2::test
