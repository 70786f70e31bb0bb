// Backward ops against central finite differences in double precision. For each backward op,
// with loss = sum(w * forward(x)) and random weights w:
//   (a) the double reference backward equals the central difference (h = 1e-6) of the double
//       reference forward: truncation h^2 f'''/6 ~ 1e-13 plus cancellation eps|L|/h ~ 1e-9, so
//       kFdTol (atol 1e-7, rtol 1e-6) leaves two orders of margin;
//   (b) the f32 cpu kernel backward (fed by the f32 cpu kernel forward where it needs saved
//       tensors) equals that same FD gradient within default_tolerance(f32) widened by the FD
//       error bound: inputs are exact f32 values, so the kernel's only error is FP32 arithmetic.
// Also AdamW against a three-step sequence computed by hand (values worked out independently).
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"

namespace h2::test {
namespace {

constexpr Tolerance kFdTol{1e-7, 1e-6};
constexpr double kH = 1e-6;

Tolerance kernel_tol() {
  Tolerance t = default_tolerance(DType::f32);
  t.atol += kFdTol.atol;
  return t;
}

double dot(const ref::Vec& a, const ref::Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss(x) with respect to every element of x.
ref::Vec fd_grad(const std::function<double(const ref::Vec&)>& loss, ref::Vec x) {
  ref::Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + kH;
    double up = loss(x);
    x[i] = keep - kH;
    double down = loss(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * kH);
  }
  return g;
}

class GradCheck : public testing::Test, public OpTestBase {
 public:
  Device& dev() const override { return shared_runtime().cpu(); }
  DType dt() const override { return DType::f32; }

  // (a): reference backward vs finite differences, both in double.
  void expect_ref_matches_fd(const std::string& what, const ref::Vec& analytic,
                             const ref::Vec& fd) {
    ASSERT_EQ(analytic.size(), fd.size()) << what;
    for (size_t i = 0; i < fd.size(); ++i)
      if (std::abs(analytic[i] - fd[i]) > kFdTol.atol + kFdTol.rtol * std::abs(fd[i])) {
        ADD_FAILURE() << what << ": reference backward [" << i << "] = " << analytic[i]
                      << " but finite differences give " << fd[i];
        return;
      }
  }
  // (b): the f32 kernel's gradient vs finite differences.
  void expect_kernel_matches_fd(const std::string& what, const Tensor& got, const ref::Vec& fd) {
    expect_close(what + " (f32 kernel vs finite differences)", got, fd, kernel_tol());
  }
};

TEST_F(GradCheck, embedding_bwd) {
  const int64_t V = 6, C = 4;
  std::vector<int64_t> ids{1, 3, 1, 5, 1};  // repeats accumulate
  int64_t N = int64_t(ids.size());
  auto table = rand(V * C), w = rand(N * C);
  ref::Vec wd = to_double(w);
  auto loss = [&](const ref::Vec& t) { return dot(wd, ref::embedding_fwd(t, ids, C)); };
  ref::Vec fd = fd_grad(loss, to_double(table));
  ref::Vec analytic(size_t(V * C), 0.0);
  ref::embedding_bwd(analytic, wd, ids, C);
  expect_ref_matches_fd("dtable", analytic, fd);

  Tensor dtable = upload(std::vector<float>(size_t(V * C), 0.0f), {V, C});
  ops::embedding_bwd(
      {.dtable = dtable, .dout = upload(w, {N, C}), .ids = this->ids(ids, {N}, DType::i64)});
  expect_kernel_matches_fd("dtable", dtable, fd);
}

TEST_F(GradCheck, rms_norm_bwd) {
  const int64_t N = 3, C = 6;
  const double eps = double(1e-5f);
  auto x = rand(N * C, -2, 2), weight = rand(C, 0.5f, 1.5f), w = rand(N * C);
  ref::Vec xd = to_double(x), gd = to_double(weight), wd = to_double(w);
  ref::Vec fd_x =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::rms_norm_fwd(v, gd, C, eps).out); }, xd);
  ref::Vec fd_w =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::rms_norm_fwd(xd, v, C, eps).out); }, gd);
  ref::RmsNormGrads analytic = ref::rms_norm_bwd(wd, xd, gd, C, eps);
  expect_ref_matches_fd("dx", analytic.dx, fd_x);
  expect_ref_matches_fd("dweight", analytic.dweight, fd_w);

  Tensor tx = upload(x, {N, C}), tw = upload(weight, {C});
  Tensor out = nans({N, C}, DType::f32), rstd = nans({N}, DType::f32);
  ops::rms_norm_fwd({.out = out, .rstd = rstd, .x = tx, .weight = tw, .eps = 1e-5f});
  Tensor dx = nans({N, C}, DType::f32), dweight = nans({C}, DType::f32);
  ops::rms_norm_bwd({.dx = dx,
                     .dweight = dweight,
                     .dout = upload(w, {N, C}),
                     .x = tx,
                     .weight = tw,
                     .rstd = rstd});
  expect_kernel_matches_fd("dx", dx, fd_x);
  expect_kernel_matches_fd("dweight", dweight, fd_w);
}

TEST_F(GradCheck, rope_bwd) {
  const int64_t B = 2, T = 4, H = 2, D = 6, offset = 3;
  const double theta = 10000;
  auto x = rand(B * T * H * D), w = rand(B * T * H * D);
  ref::Vec wd = to_double(w);
  ref::Vec fd = fd_grad(
      [&](const ref::Vec& v) { return dot(wd, ref::rope(v, B, T, H, D, theta, offset, 1)); },
      to_double(x));
  expect_ref_matches_fd("dx", ref::rope(wd, B, T, H, D, theta, offset, -1), fd);

  Tensor dx = nans({B, T, H, D}, DType::f32);
  ops::rope_bwd(
      {.out = dx, .x = upload(w, {B, T, H, D}), .theta = float(theta), .position_offset = offset});
  expect_kernel_matches_fd("dx", dx, fd);
}

void attention_gradcheck(GradCheck& t, const ref::AttnDims& d) {
  auto q = t.rand(d.B * d.T * d.H * d.D, -2, 2), k = t.rand(d.B * d.T * d.Hkv * d.D, -2, 2);
  auto v = t.rand(d.B * d.T * d.Hkv * d.D), w = t.rand(d.B * d.T * d.H * d.D);
  ref::Vec qd = to_double(q), kd = to_double(k), vd = to_double(v), wd = to_double(w);
  auto loss = [&](const ref::Vec& qq, const ref::Vec& kk, const ref::Vec& vv) {
    return dot(wd, ref::attention_fwd(qq, kk, vv, d).out);
  };
  ref::Vec fd_q = fd_grad([&](const ref::Vec& x) { return loss(x, kd, vd); }, qd);
  ref::Vec fd_k = fd_grad([&](const ref::Vec& x) { return loss(qd, x, vd); }, kd);
  ref::Vec fd_v = fd_grad([&](const ref::Vec& x) { return loss(qd, kd, x); }, vd);
  ref::AttnGrads analytic =
      ref::attention_bwd(wd, qd, kd, vd, ref::attention_fwd(qd, kd, vd, d).out, d);
  std::string tag = fmt::format(" (B={}, T={}, H={}, Hkv={}, D={})", d.B, d.T, d.H, d.Hkv, d.D);
  t.expect_ref_matches_fd("dq" + tag, analytic.dq, fd_q);
  t.expect_ref_matches_fd("dk" + tag, analytic.dk, fd_k);
  t.expect_ref_matches_fd("dv" + tag, analytic.dv, fd_v);

  Shape qs{d.B, d.T, d.H, d.D}, ks{d.B, d.T, d.Hkv, d.D};
  Tensor tq = t.upload(q, qs), tk = t.upload(k, ks), tv = t.upload(v, ks);
  Tensor out = t.nans(qs, DType::f32), lse = t.nans({d.B, d.H, d.T}, DType::f32);
  ops::attention_fwd({.out = out, .lse = lse, .q = tq, .k = tk, .v = tv});
  Tensor dq = t.nans(qs, DType::f32), dk = t.nans(ks, DType::f32), dv = t.nans(ks, DType::f32);
  ops::attention_bwd({.dq = dq,
                      .dk = dk,
                      .dv = dv,
                      .dout = t.upload(w, qs),
                      .q = tq,
                      .k = tk,
                      .v = tv,
                      .out = out,
                      .lse = lse});
  t.expect_kernel_matches_fd("dq" + tag, dq, fd_q);
  t.expect_kernel_matches_fd("dk" + tag, dk, fd_k);
  t.expect_kernel_matches_fd("dv" + tag, dv, fd_v);
}

TEST_F(GradCheck, attention_bwd_gqa) {
  attention_gradcheck(*this, {.B = 1, .T = 5, .H = 4, .Hkv = 2, .D = 4});
}
TEST_F(GradCheck, attention_bwd_mqa) {
  attention_gradcheck(*this, {.B = 2, .T = 6, .H = 2, .Hkv = 1, .D = 3});
}

TEST_F(GradCheck, swiglu_bwd) {
  const int64_t n = 3 * 7;
  auto gate = rand(n, -6, 6), up = rand(n, -2, 2), w = rand(n);
  ref::Vec gd = to_double(gate), ud = to_double(up), wd = to_double(w);
  ref::Vec fd_g = fd_grad([&](const ref::Vec& v) { return dot(wd, ref::swiglu_fwd(v, ud)); }, gd);
  ref::Vec fd_u = fd_grad([&](const ref::Vec& v) { return dot(wd, ref::swiglu_fwd(gd, v)); }, ud);
  ref::SwigluGrads analytic = ref::swiglu_bwd(wd, gd, ud);
  expect_ref_matches_fd("dgate", analytic.dgate, fd_g);
  expect_ref_matches_fd("dup", analytic.dup, fd_u);

  Tensor dgate = nans({3, 7}, DType::f32), dup = nans({3, 7}, DType::f32);
  ops::swiglu_bwd({.dgate = dgate,
                   .dup = dup,
                   .dout = upload(w, {3, 7}),
                   .gate = upload(gate, {3, 7}),
                   .up = upload(up, {3, 7})});
  expect_kernel_matches_fd("dgate", dgate, fd_g);
  expect_kernel_matches_fd("dup", dup, fd_u);
}

// loss = dloss * sum_n losses_n (ignored rows contribute 0).
TEST_F(GradCheck, cross_entropy_bwd) {
  const int64_t N = 5, V = 7, ignore = -100;
  const float dloss = 0.25f;
  std::vector<int64_t> targets{3, ignore, 0, 6, 3};
  auto logits = rand(N * V, -4, 4);
  auto loss = [&](const ref::Vec& l) {
    return double(dloss) * ref::sum(ref::cross_entropy_fwd(l, targets, V, ignore).losses);
  };
  ref::Vec fd = fd_grad(loss, to_double(logits));
  expect_ref_matches_fd("dlogits",
                        ref::cross_entropy_bwd(to_double(logits), targets, V, dloss, ignore), fd);

  Tensor tl = upload(logits, {N, V}), tt = ids(targets, {N}, DType::i32);
  Tensor losses = nans({N}, DType::f32), lse = nans({N}, DType::f32),
         dlogits = nans({N, V}, DType::f32);
  ops::cross_entropy_fwd({.losses = losses, .lse = lse, .logits = tl, .targets = tt});
  ops::cross_entropy_bwd(
      {.dlogits = dlogits, .logits = tl, .lse = lse, .targets = tt, .dloss = dloss});
  expect_kernel_matches_fd("dlogits", dlogits, fd);
}

// out = A @ B: dA = dOut B^T and dB = A^T dOut, each one matmul call.
TEST_F(GradCheck, matmul_grads_plain) {
  const int64_t M = 4, K = 5, N = 3;
  auto a = rand(M * K), b = rand(K * N), w = rand(M * N);
  ref::Vec ad = to_double(a), bd = to_double(b), wd = to_double(w);
  ref::MatmulDims fwd{.M = M, .N = N, .K = K};
  ref::Vec fd_a =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::matmul(v, bd, {}, fwd, 1, 0)); }, ad);
  ref::Vec fd_b =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::matmul(ad, v, {}, fwd, 1, 0)); }, bd);
  expect_ref_matches_fd(
      "dA", ref::matmul(wd, bd, {}, {.M = M, .N = K, .K = N, .trans_b = true}, 1, 0), fd_a);
  expect_ref_matches_fd(
      "dB", ref::matmul(ad, wd, {}, {.M = K, .N = N, .K = M, .trans_a = true}, 1, 0), fd_b);

  Tensor da = nans({M, K}, DType::f32), db = nans({K, N}, DType::f32), tw = upload(w, {M, N});
  ops::matmul({.out = da, .a = tw, .b = upload(b, {K, N}), .trans_b = true});
  ops::matmul({.out = db, .a = upload(a, {M, K}), .b = tw, .trans_a = true});
  expect_kernel_matches_fd("dA", da, fd_a);
  expect_kernel_matches_fd("dB", db, fd_b);
}

// A linear layer: out (S, M, N) = x (S, M, K) @ W^T with W (N, K) shared over the batch.
// dx = dOut @ W (shared b); dW = dOut^T @ x over the flattened (S*M) rows (trans_a).
TEST_F(GradCheck, matmul_grads_linear_layer) {
  const int64_t S = 2, M = 3, K = 5, N = 4;
  auto x = rand(S * M * K), wt = rand(N * K), w = rand(S * M * N);
  ref::Vec xd = to_double(x), wtd = to_double(wt), wd = to_double(w);
  ref::MatmulDims fwd{.S = S, .M = M, .N = N, .K = K, .trans_b = true, .b_shared = true};
  ref::Vec fd_x =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::matmul(v, wtd, {}, fwd, 1, 0)); }, xd);
  ref::Vec fd_w =
      fd_grad([&](const ref::Vec& v) { return dot(wd, ref::matmul(xd, v, {}, fwd, 1, 0)); }, wtd);
  expect_ref_matches_fd(
      "dx", ref::matmul(wd, wtd, {}, {.S = S, .M = M, .N = K, .K = N, .b_shared = true}, 1, 0),
      fd_x);
  expect_ref_matches_fd(
      "dW", ref::matmul(wd, xd, {}, {.M = N, .N = K, .K = S * M, .trans_a = true}, 1, 0), fd_w);

  Tensor dx = nans({S, M, K}, DType::f32), dw = nans({N, K}, DType::f32);
  ops::matmul({.out = dx, .a = upload(w, {S, M, N}), .b = upload(wt, {N, K})});
  ops::matmul({.out = dw, .a = upload(w, {S * M, N}), .b = upload(x, {S * M, K}), .trans_a = true});
  expect_kernel_matches_fd("dx", dx, fd_x);
  expect_kernel_matches_fd("dW", dw, fd_w);
}

// One scalar parameter p0 = 1, gradients 0.5, -0.25, 1; lr 0.1, betas 0.9/0.95, eps 1e-8, wd 0.1.
// Step 1 by hand: m = 0.05, v = 0.0125, m_hat = 0.5, v_hat = 0.25, so
// p = 1 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.1) = 0.890000002; steps 2 and 3 likewise.
TEST_F(GradCheck, adamw_three_steps_by_hand) {
  const double grads[3] = {0.5, -0.25, 1.0};
  const double want_p[3] = {0.890000002, 0.8542630578558273, 0.7808459348967066};
  const double want_m[3] = {0.05, 0.02, 0.118}, want_v[3] = {0.0125, 0.015, 0.06425};
  ref::AdamwHyper h{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  ref::Vec p{1.0}, m{0.0}, v{0.0};
  Tensor tp = upload({1.0f}, {1}), tm = upload({0.0f}, {1}), tv = upload({0.0f}, {1});
  for (int s = 0; s < 3; ++s) {
    ref::adamw_step(p, m, v, {grads[s]}, h, s + 1);
    EXPECT_NEAR(p[0], want_p[s], 1e-12) << "reference step " << s + 1;
    EXPECT_NEAR(m[0], want_m[s], 1e-12) << "reference step " << s + 1;
    EXPECT_NEAR(v[0], want_v[s], 1e-12) << "reference step " << s + 1;
    ops::adamw({.param = tp,
                .m = tm,
                .v = tv,
                .param_copy = {},
                .grad = upload({float(grads[s])}, {1}),
                .lr = 0.1f,
                .beta1 = 0.9f,
                .beta2 = 0.95f,
                .eps = 1e-8f,
                .weight_decay = 0.1f,
                .step = s + 1});
    std::string tag = fmt::format(" after step {}", s + 1);
    expect_close("param" + tag, tp, {want_p[s]});
    expect_close("m" + tag, tm, {want_m[s]});
    expect_close("v" + tag, tv, {want_v[s]});
  }
}

}  // namespace
}  // namespace h2::test
