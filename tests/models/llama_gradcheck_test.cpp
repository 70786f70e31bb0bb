// Whole-model gradient check: the gradient the f32 model (cpu:0) computes for EVERY element of
// EVERY parameter tensor is compared with central finite differences (h = 1e-6) of the loss
// computed in double precision by the independent reference forward (llama_reference.cpp).
// The parameters are first re-drawn with a larger spread than the 0.02 init (weights in
// [-0.4, 0.4], norm weights in [0.7, 1.3]) so attention, SwiGLU and the norms are exercised in
// their non-linear range, and one target is ignored (-100) to check the mean's denominator.
// Error budget: FD in double has truncation ~h^2 |f'''| ~ 1e-12 and cancellation
// ~eps_double |L| / h ~ 1e-9; the model runs in f32 (unit roundoff 6e-8) over chains of a few
// dozen ops, so its gradient error is ~1e-6 of the tensor's gradient scale. We accept
// |g - fd| <= 1e-4 * max|fd| (over the tensor) + 1e-3 * |fd|, still ~100x below any real bug
// (a wrong sign, index or missing term shows up at the size of the gradient itself).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/tensor_host.h"
#include "tests/models/llama_reference.h"

namespace h2::test {
namespace {

// Re-draws every parameter on the host and uploads it (norm weights near 1, others spread).
void spread_parameters(models::Llama& model, uint32_t seed) {
  std::mt19937 gen(seed);
  auto unit = [&] { return double(gen()) / 4294967296.0; };
  for (auto& np : model.named_parameters()) {
    const bool norm = np.name.find("norm") != std::string::npos;
    std::vector<float> v(size_t(np.param.numel()));
    for (float& x : v) x = float(norm ? 0.7 + 0.6 * unit() : -0.4 + 0.8 * unit());
    np.param.copy_from(
        tensor_from_floats(v, np.param.shape(), np.param.dtype(), model_runtime().cpu()));
  }
}

void check_all_gradients(bool tie) {
  const models::LlamaConfig cfg = tiny_llama_config(tie);
  const int64_t B = 2, T = 5;
  Device& cpu = model_runtime().cpu();
  models::Llama model(cfg, cpu, {.dtype = DType::f32, .seed = 7});
  spread_parameters(model, 1234);
  ref::Ids ids{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  ref::Ids targets{1, 4, 1, 5, 9, 2, 6, 5, -100, 10};
  Tensor tids = tensor_from_ints(ids, {B * T}, DType::i32, cpu);
  Tensor ttargets = tensor_from_ints(targets, {B * T}, DType::i32, cpu);

  model.zero_grad();
  const float loss = model.forward_backward(tids, ttargets, B, T);
  ParamMap params = params_as_double(model);
  const double ref0 = reference_loss(cfg, params, ids, targets, B, T);
  EXPECT_NEAR(loss, ref0, 1e-5 * std::abs(ref0)) << "model loss vs double reference";

  const double h = 1e-6;
  double worst_rel = 0;  // max over elements of |g - fd| / max|fd| of the tensor
  int checked = 0;
  for (const auto& np : model.named_parameters()) {
    std::vector<float> grad = tensor_to_floats(np.grad);
    ref::Vec& w = params.at(np.name);
    ref::Vec fd(w.size());
    double scale = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double keep = w[i];
      w[i] = keep + h;
      const double up = reference_loss(cfg, params, ids, targets, B, T);
      w[i] = keep - h;
      const double down = reference_loss(cfg, params, ids, targets, B, T);
      w[i] = keep;
      fd[i] = (up - down) / (2 * h);
      scale = std::max(scale, std::abs(fd[i]));
    }
    ASSERT_GT(scale, 0) << np.name << ": finite differences are all zero";
    int failures = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double err = std::abs(double(grad[i]) - fd[i]);
      worst_rel = std::max(worst_rel, err / scale);
      if (err > 1e-4 * scale + 1e-3 * std::abs(fd[i]) && failures++ < 3)
        ADD_FAILURE() << np.name << "[" << i << "]: model " << grad[i] << ", FD " << fd[i]
                      << " (tensor gradient scale " << scale << ")";
      ++checked;
    }
  }
  std::printf("gradcheck (tie=%d): %d elements, max |g - fd| / max|fd| = %.3g\n", int(tie), checked,
              worst_rel);
}

TEST(LlamaGradCheck, every_parameter_matches_double_finite_differences) {
  check_all_gradients(false);
}

TEST(LlamaGradCheck, tied_embeddings_match_double_finite_differences) {
  check_all_gradients(true);
}

}  // namespace
}  // namespace h2::test
