// Conformance of the fused cross-entropy (forward and backward, with ignore_index rows giving
// exactly zero loss and gradient) and of the AdamW step (f32 master state, grad and the optional
// compute copy in the storage dtype), including a three-step sequence against closed-form values.
#include <cmath>

#include <fmt/format.h>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"

namespace h2::test {
namespace {

struct CeCase {
  int64_t N, V;
  int64_t ignore_index = -100;
  int ignored_every = 0;  // every k-th row gets target ignore_index (0: none)
  DType id_dtype = DType::i32;
  float dloss = 1;
  bool transposed_logits = false;
};

std::string describe(const CeCase& c) {
  return fmt::format("(N={}, V={}) ignore_index={} {} targets dloss={}{}", c.N, c.V, c.ignore_index,
                     dtype_name(c.id_dtype), c.dloss,
                     c.transposed_logits ? " transposed logits" : "");
}

std::vector<int64_t> make_targets(OpConformance& t, const CeCase& c) {
  std::vector<int64_t> targets = t.rand_ids(c.N, c.V);
  for (int64_t n = 0; c.ignored_every > 0 && n < c.N; n += c.ignored_every)
    targets[size_t(n)] = c.ignore_index;
  return targets;
}

void check_ce(OpConformance& t, Op op, const CeCase& c) {
  auto logits = t.rand(c.N * c.V, -4, 4);
  std::vector<int64_t> targets = make_targets(t, c);
  Tensor tl =
      c.transposed_logits ? t.transposed(logits, c.N, c.V, t.dt()) : t.upload(logits, {c.N, c.V});
  Tensor tt = t.ids(targets, {c.N}, c.id_dtype);
  ref::CrossEntropyOut want =
      ref::cross_entropy_fwd(to_double(logits), targets, c.V, c.ignore_index);
  std::string tag = fmt::format(" {}", describe(c));
  if (op == Op::cross_entropy_fwd) {
    Tensor losses = t.nans({c.N}, DType::f32), lse = t.nans({c.N}, DType::f32);
    ops::cross_entropy_fwd({.losses = losses,
                            .lse = lse,
                            .logits = tl,
                            .targets = tt,
                            .ignore_index = c.ignore_index});
    std::vector<float> got_loss = tensor_to_floats(losses), got_lse = tensor_to_floats(lse);
    t.expect_close("losses" + tag, got_loss, want.losses, {c.N}, DType::f32,
                   default_tolerance(DType::f32));
    // lse of ignored rows is unspecified: compare the others only.
    std::vector<float> kept;
    ref::Vec kept_ref;
    for (int64_t n = 0; n < c.N; ++n) {
      if (targets[size_t(n)] == c.ignore_index) {
        EXPECT_EQ(got_loss[size_t(n)], 0.0f) << t.context() << ": ignored row " << n << tag;
        continue;
      }
      kept.push_back(got_lse[size_t(n)]);
      kept_ref.push_back(want.lse[size_t(n)]);
    }
    t.expect_close("lse (rows not ignored)" + tag, kept, kept_ref, {int64_t(kept.size())},
                   DType::f32, default_tolerance(DType::f32));
  } else {
    std::vector<float> lse_saved(want.lse.begin(), want.lse.end());
    Tensor dlogits = t.nans({c.N, c.V}, t.dt());
    ops::cross_entropy_bwd({.dlogits = dlogits,
                            .logits = tl,
                            .lse = t.upload(lse_saved, {c.N}, DType::f32),
                            .targets = tt,
                            .dloss = c.dloss,
                            .ignore_index = c.ignore_index});
    std::vector<float> got = tensor_to_floats(dlogits);
    t.expect_close("dlogits" + tag, got,
                   ref::cross_entropy_bwd(to_double(logits), targets, c.V, c.dloss, c.ignore_index),
                   {c.N, c.V}, t.dt(), default_tolerance(t.dt()));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t v = 0; v < c.V && targets[size_t(n)] == c.ignore_index; ++v)
        ASSERT_EQ(got[size_t(n * c.V + v)], 0.0f) << t.context() << ": ignored row " << n << tag;
  }
}

const CeCase kCeEdge[] = {
    {.N = 7, .V = 13, .ignored_every = 3},
    {.N = 9,
     .V = 6,
     .ignore_index = 3,
     .id_dtype = DType::i64,
     .dloss = 0.5f},   // class id as ignore
    {.N = 4, .V = 1},  // V == 1: loss 0
    {.N = 0, .V = 5},
    {.N = 5, .V = 11, .ignored_every = 2, .dloss = 0.25f, .transposed_logits = true},
};

TEST_P(OpConformance, cross_entropy_fwd_shapes_and_ignore) {
  H2_REQUIRE_OP(Op::cross_entropy_fwd);
  for (const CeCase& c : kCeEdge) check_ce(*this, Op::cross_entropy_fwd, c);
}

TEST_P(OpConformance, cross_entropy_bwd_shapes_and_ignore) {
  H2_REQUIRE_OP(Op::cross_entropy_bwd);
  for (const CeCase& c : kCeEdge) check_ce(*this, Op::cross_entropy_bwd, c);
}

TEST_P(OpConformance, cross_entropy_fwd_model) {
  H2_REQUIRE_OP(Op::cross_entropy_fwd);
  check_ce(*this, Op::cross_entropy_fwd,
           {.N = 128, .V = 1000, .ignored_every = 17, .id_dtype = DType::i64});
}

TEST_P(OpConformance, cross_entropy_bwd_model) {
  H2_REQUIRE_OP(Op::cross_entropy_bwd);
  check_ce(*this, Op::cross_entropy_bwd,
           {.N = 128, .V = 1000, .ignored_every = 17, .id_dtype = DType::i64, .dloss = 1.0f / 120});
  check_ce(*this, Op::cross_entropy_bwd, {.N = 128, .V = 1000});
}

struct AdamwCase {
  Shape shape;
  ref::AdamwHyper h{};
  int64_t step = 1;
  bool fresh_state = true;  // m = v = 0 (the first step) or random moments
  bool with_copy = true;
  bool noncontiguous = false;  // rank 2: param a transposed view (written back), grad padded
};

void check_adamw(OpConformance& t, const AdamwCase& c) {
  int64_t n = c.shape.numel();
  auto param = t.rand(n, -1, 1, DType::f32), grad = t.rand(n, -1, 1);
  std::vector<float> m(size_t(n), 0.0f), v(size_t(n), 0.0f);
  if (!c.fresh_state) {
    m = t.rand(n, -0.05f, 0.05f, DType::f32);
    v = t.rand(n, 1e-3f, 1e-2f, DType::f32);
  }
  Tensor tp = c.noncontiguous ? t.transposed(param, c.shape[0], c.shape[1], DType::f32)
                              : t.upload(param, c.shape, DType::f32);
  Tensor tm = t.upload(m, c.shape, DType::f32);
  Tensor tv = t.upload(v, c.shape, DType::f32);
  Tensor copy = c.with_copy ? t.nans(c.shape, t.dt()) : Tensor();
  const ref::AdamwHyper& h = c.h;
  ops::adamw({.param = tp,
              .m = tm,
              .v = tv,
              .param_copy = copy,
              .grad = c.noncontiguous ? t.padded(grad, c.shape, t.dt()) : t.upload(grad, c.shape),
              .lr = float(h.lr),
              .beta1 = float(h.beta1),
              .beta2 = float(h.beta2),
              .eps = float(h.eps),
              .weight_decay = float(h.weight_decay),
              .grad_scale = float(h.grad_scale),
              .step = c.step});
  // The reference runs on the float hyperparameters the kernel received, widened.
  ref::AdamwHyper hf{double(float(h.lr)),           double(float(h.beta1)),
                     double(float(h.beta2)),        double(float(h.eps)),
                     double(float(h.weight_decay)), double(float(h.grad_scale))};
  ref::Vec p = to_double(param), md = to_double(m), vd = to_double(v);
  ref::adamw_step(p, md, vd, to_double(grad), hf, c.step);
  std::string tag = fmt::format(" {} step {} lr {} wd {} grad_scale {}", c.shape.str(), c.step,
                                h.lr, h.weight_decay, h.grad_scale);
  t.expect_close("param" + tag, tp, p);
  t.expect_close("m" + tag, tm, md);
  t.expect_close("v" + tag, tv, vd);
  if (c.with_copy) t.expect_close("param_copy" + tag, copy, p);
}

TEST_P(OpConformance, adamw_first_step) {
  H2_REQUIRE_OP(Op::adamw);
  check_adamw(*this, {.shape = {7, 13}});
  check_adamw(*this, {.shape = {1}, .with_copy = false});
  check_adamw(*this, {.shape = {0, 4}});
  check_adamw(*this, {.shape = {6, 9}, .noncontiguous = true});
}

TEST_P(OpConformance, adamw_later_step_decay_scale) {
  H2_REQUIRE_OP(Op::adamw);
  check_adamw(*this, {.shape = {5, 11},
                      .h = {.lr = 3e-3, .weight_decay = 0.1, .grad_scale = 0.5},
                      .step = 7,
                      .fresh_state = false});
  check_adamw(*this, {.shape = {3, 3},
                      .h = {.beta2 = 0.999},
                      .step = 100,
                      .fresh_state = false,
                      .with_copy = false});
}

TEST_P(OpConformance, adamw_model) {
  H2_REQUIRE_OP(Op::adamw);
  check_adamw(*this,
              {.shape = {688, 256}, .h = {.weight_decay = 0.1}, .step = 3, .fresh_state = false});
}

// A constant gradient g keeps the bias-corrected moments at m_hat = g and v_hat = g^2, so each
// step is p <- p (1 - lr wd) - lr g / (|g| + eps): three steps computed by hand in double.
TEST_P(OpConformance, adamw_three_steps_closed_form) {
  H2_REQUIRE_OP(Op::adamw);
  const int64_t n = 10;
  const float lr = 0.01f, wd = 0.05f, eps = 1e-8f;
  auto param = rand(n, -1, 1, DType::f32);
  std::vector<float> grad(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    grad[size_t(i)] = round_to(dt(), (i % 2 ? -1.0f : 1.0f) * (0.1f + 0.2f * float(i)));
  Tensor tp = upload(param, {n}, DType::f32),
         tm = upload(std::vector<float>(size_t(n), 0.0f), {n}, DType::f32);
  Tensor tv = upload(std::vector<float>(size_t(n), 0.0f), {n}, DType::f32), tg = upload(grad, {n});
  Tensor copy = nans({n}, dt());
  ref::Vec want = to_double(param);
  for (int64_t step = 1; step <= 3; ++step) {
    ops::adamw({.param = tp,
                .m = tm,
                .v = tv,
                .param_copy = copy,
                .grad = tg,
                .lr = lr,
                .weight_decay = wd,
                .step = step});
    for (int64_t i = 0; i < n; ++i) {
      double g = grad[size_t(i)];
      want[size_t(i)] = want[size_t(i)] * (1 - double(lr) * double(wd)) -
                        double(lr) * g / (std::abs(g) + double(eps));
    }
    expect_close(fmt::format("param after step {}", step), tp, want);
    expect_close(fmt::format("param_copy after step {}", step), copy, want);
  }
}

}  // namespace
}  // namespace h2::test
