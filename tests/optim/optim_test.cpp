// The learning-rate schedule against its closed form, and AdamW with FP32 master weights against
// a double-precision reference of the update rule over several steps, with clipping and a bf16
// compute copy.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "backends/registry.h"
#include "core/half_float.h"
#include "core/tensor_host.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

namespace h2::optim {
namespace {

TEST(LrSchedule, WarmupThenCosineToMinimum) {
  LrSchedule s{.lr = 1.0, .min_lr = 0.1, .warmup_steps = 4, .total_steps = 14};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);     // cosine starts at the peak
  EXPECT_NEAR(s.at(9), 0.55, 1e-12);  // halfway: (lr + min_lr) / 2
  EXPECT_NEAR(s.at(6), 0.1 + 0.45 * (1 + std::cos(std::numbers::pi * 0.2)), 1e-12);
  EXPECT_DOUBLE_EQ(s.at(14), 0.1);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.1);
  LrSchedule constant{.lr = 0.5, .min_lr = 0.5, .warmup_steps = 0, .total_steps = 10};
  for (int64_t step : {0, 5, 9}) EXPECT_DOUBLE_EQ(constant.at(step), 0.5);
}

TEST(ClipScale, ScalesOnlyAboveTheLimit) {
  EXPECT_EQ(clip_scale(0.5, 1.0), 1.0);
  EXPECT_NEAR(clip_scale(4.0, 1.0), 0.25, 1e-6);
  EXPECT_EQ(clip_scale(4.0, 0.0), 1.0);  // clipping off
}

// One parameter's state in double: the update rule of op_args.h's AdamwArgs.
struct RefParam {
  std::vector<double> w, m, v;
  void step(const std::vector<double>& g, double lr, double scale, double decay, int64_t t,
            const AdamwOptions& o) {
    for (size_t i = 0; i < w.size(); ++i) {
      double gi = g[i] * scale;
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
      double mhat = m[i] / (1 - std::pow(o.beta1, double(t)));
      double vhat = v[i] / (1 - std::pow(o.beta2, double(t)));
      w[i] -= lr * (mhat / (std::sqrt(vhat) + o.eps) + decay * w[i]);
    }
  }
};

TEST(AdamW, MatchesDoubleReferenceWithClippingAndBf16Copy) {
  auto runtime = create_runtime();
  Device& cpu = runtime->cpu();
  std::vector<float> w0 = {0.5f, -0.25f, 1.0f, 2.0f, -1.5f, 0.125f};  // (2, 3) matrix, f32
  std::vector<float> n0 = {1.0f, 0.75f, 1.25f};                       // (3) gain, bf16 copy
  std::vector<float> gw = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f}, gn = {1.0f, -2.0f, 3.0f};
  ParamRef matrix{"w", tensor_from_floats(w0, {2, 3}, DType::f32, cpu),
                  tensor_from_floats(gw, {2, 3}, DType::f32, cpu)};
  ParamRef gain{"norm", tensor_from_floats(n0, {3}, DType::bf16, cpu),
                tensor_from_floats(gn, {3}, DType::f32, cpu)};
  AdamwOptions options{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  AdamW adamw({matrix, gain}, options);

  double norm_sq = 0;
  for (float g : gw) norm_sq += double(g) * g;
  for (float g : gn) norm_sq += double(g) * g;
  ASSERT_NEAR(adamw.grad_norm(), std::sqrt(norm_sq), 1e-6);

  RefParam rw{{w0.begin(), w0.end()}, std::vector<double>(6), std::vector<double>(6)};
  RefParam rn{{n0.begin(), n0.end()}, std::vector<double>(3), std::vector<double>(3)};
  const std::vector<double> gwd(gw.begin(), gw.end()), gnd(gn.begin(), gn.end());
  for (int64_t t = 1; t <= 3; ++t) {
    double lr = 0.01 * double(t), scale = clip_scale(adamw.grad_norm(), 1.0);
    adamw.step(lr, scale);
    rw.step(gwd, lr, scale, 0.1, t, options);  // matrices decay
    rn.step(gnd, lr, scale, 0.0, t, options);  // gains do not
  }
  EXPECT_EQ(adamw.steps_taken(), 3);
  auto got_w = tensor_to_floats(matrix.param);
  for (size_t i = 0; i < got_w.size(); ++i) EXPECT_NEAR(got_w[i], rw.w[i], 1e-6) << i;
  auto master_n = tensor_to_floats(adamw.state()[1].master);
  auto copy_n = tensor_to_floats(gain.param);
  for (size_t i = 0; i < copy_n.size(); ++i) {
    EXPECT_NEAR(master_n[i], rn.w[i], 1e-6) << i;
    EXPECT_EQ(copy_n[i], bf16_to_f32(f32_to_bf16(master_n[i]))) << "compute copy is bf16(master)";
  }
  adamw.zero_grad();
  EXPECT_EQ(adamw.grad_norm(), 0.0);
}

}  // namespace
}  // namespace h2::optim
