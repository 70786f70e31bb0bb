// Conformance of matmul: every transpose combination on odd shapes, batched and shared-weight
// operands, alpha/beta semantics (beta == 0 must not read out; K == 0 gives beta*out), 0-size and
// 1x1x1 edges, non-contiguous operands and the model's linear-layer shapes. Weights are drawn with
// the 1/sqrt(K) scale of an initialised layer, so outputs are O(1) as in training.
#include <cmath>

#include <fmt/format.h>

#include "backends/cpu/kernels/cpu_parallel.h"
#include "core/error.h"
#include "core/ops.h"
#include "tests/ops/conformance.h"
#include "tests/ops/cpu_kernel_threads.h"

namespace h2::test {
namespace {

struct MatmulCase {
  ref::MatmulDims d;
  float alpha = 1;
  float beta = 0;
  bool batched = false;  // a and out carry a leading S dim (even when S == 1)
};

std::string describe(const MatmulCase& c) {
  return fmt::format(
      "out (S={}, M={}, N={}, K={}) trans_a={} trans_b={} b_shared={} alpha={} "
      "beta={}",
      c.d.S, c.d.M, c.d.N, c.d.K, c.d.trans_a, c.d.trans_b, c.d.b_shared, c.alpha, c.beta);
}

Shape with_batch(const MatmulCase& c, bool batch, int64_t r, int64_t k) {
  return batch ? Shape{c.d.S, r, k} : Shape{r, k};
}

// Runs one matmul with random operands and compares with the double reference; noncontiguous
// makes a a transposed view and b a padded view (rank-2 cases).
void check_matmul(OpConformance& t, const MatmulCase& c, bool noncontiguous = false) {
  const ref::MatmulDims& d = c.d;
  Shape sa = c.d.trans_a ? with_batch(c, c.batched, d.K, d.M) : with_batch(c, c.batched, d.M, d.K);
  bool b_batch = c.batched && !d.b_shared;
  Shape sb = c.d.trans_b ? with_batch(c, b_batch, d.N, d.K) : with_batch(c, b_batch, d.K, d.N);
  Shape so = with_batch(c, c.batched, d.M, d.N);
  float w = 1.0f / std::sqrt(float(std::max<int64_t>(d.K, 1)));
  auto a = t.rand(sa.numel()), b = t.rand(sb.numel(), -w, w);
  auto o = t.rand(so.numel());
  Tensor ta, tb;
  if (noncontiguous && sa.rank() == 2) {
    ta = t.transposed(a, sa[0], sa[1], t.dt());
    tb = t.padded(b, sb, t.dt());
  } else {
    ta = t.upload(a, sa);
    tb = t.upload(b, sb);
  }
  Tensor out = c.beta != 0 ? t.upload(o, so) : t.nans(so, t.dt());
  ops::matmul({.out = out,
               .a = ta,
               .b = tb,
               .trans_a = d.trans_a,
               .trans_b = d.trans_b,
               .alpha = c.alpha,
               .beta = c.beta});
  t.expect_close(describe(c), out,
                 ref::matmul(to_double(a), to_double(b), to_double(o), d, c.alpha, c.beta));
}

TEST_P(OpConformance, matmul_odd_every_transpose) {
  H2_REQUIRE_OP(Op::matmul);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check_matmul(*this, {.d = {.M = 7, .N = 5, .K = 13, .trans_a = ta, .trans_b = tb}});
}

TEST_P(OpConformance, matmul_single_element) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 1, .N = 1, .K = 1}});
}

TEST_P(OpConformance, matmul_batched) {
  H2_REQUIRE_OP(Op::matmul);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check_matmul(*this, {.d = {.S = 3, .M = 7, .N = 5, .K = 13, .trans_a = ta, .trans_b = tb},
                           .batched = true});
}

TEST_P(OpConformance, matmul_batched_shared_b) {
  H2_REQUIRE_OP(Op::matmul);
  for (bool tb : {false, true})
    check_matmul(*this, {.d = {.S = 3, .M = 9, .N = 6, .K = 11, .trans_b = tb, .b_shared = true},
                         .batched = true});
}

TEST_P(OpConformance, matmul_alpha_beta_accumulate) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 7, .N = 5, .K = 13}, .alpha = 2.0f, .beta = 0.5f});
  check_matmul(*this, {.d = {.M = 6, .N = 4, .K = 10, .trans_a = true}, .beta = 1.0f});
  check_matmul(*this, {.d = {.S = 2, .M = 5, .N = 3, .K = 8, .trans_b = true, .b_shared = true},
                       .alpha = -1.0f,
                       .beta = 1.0f,
                       .batched = true});
}

// One shape with a different alpha on every call, as FP8 GEMMs whose alpha carries their operands'
// scales: a GEMM library that keeps one kernel per shape must take each call's alpha.
TEST_P(OpConformance, matmul_same_shape_new_alpha_every_call) {
  H2_REQUIRE_OP(Op::matmul);
  for (float alpha : {0.75f, 3.0f, 1.0f, -0.0625f, 0.75f})
    check_matmul(*this, {.d = {.M = 33, .N = 17, .K = 40, .trans_b = true}, .alpha = alpha});
}

TEST_P(OpConformance, matmul_beta0_does_not_read_out) {
  H2_REQUIRE_OP(Op::matmul);  // out is prefilled with NaN: any read would propagate
  check_matmul(*this, {.d = {.M = 7, .N = 5, .K = 13}, .alpha = 0.5f});
}

TEST_P(OpConformance, matmul_k0_gives_beta_out) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 4, .N = 6, .K = 0}, .beta = 0.75f});
  check_matmul(*this, {.d = {.M = 4, .N = 6, .K = 0}});  // beta 0: zeros
  check_matmul(
      *this,
      {.d = {.S = 2, .M = 3, .N = 2, .K = 0, .trans_a = true}, .beta = -1.0f, .batched = true});
}

TEST_P(OpConformance, matmul_zero_size) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 0, .N = 5, .K = 3}});
  check_matmul(*this, {.d = {.M = 4, .N = 0, .K = 3}});
  check_matmul(*this, {.d = {.S = 0, .M = 2, .N = 5, .K = 3}, .batched = true});
}

TEST_P(OpConformance, matmul_noncontiguous) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 7, .N = 5, .K = 13}}, true);
  check_matmul(*this, {.d = {.M = 6, .N = 9, .K = 4, .trans_a = true, .trans_b = true}}, true);
}

// B=2, T=64, C=256, ffn 688, vocab 1000: the linear layers as the model calls them.
TEST_P(OpConformance, matmul_model_up_proj) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this,
               {.d = {.S = 2, .M = 64, .N = 688, .K = 256, .trans_b = true, .b_shared = true},
                .batched = true});
}

TEST_P(OpConformance, matmul_model_down_proj) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this,
               {.d = {.S = 2, .M = 64, .N = 256, .K = 688, .trans_b = true, .b_shared = true},
                .batched = true});
}

TEST_P(OpConformance, matmul_model_lm_head) {
  H2_REQUIRE_OP(Op::matmul);
  check_matmul(*this, {.d = {.M = 128, .N = 1000, .K = 256, .trans_b = true}});
}

// 201 rows of a shared b (K 200, N 300): where bf16/f16 are widened to f32, the CPU does it by
// blocks of rows (at most 128 here, and a shorter last one), each block multiplied by one
// thread; with alpha and beta, and b stored either way.
TEST_P(OpConformance, matmul_rows_in_blocks_with_alpha_beta) {
  H2_REQUIRE_OP(Op::matmul);
  for (bool tb : {false, true})
    check_matmul(*this,
                 {.d = {.S = 3, .M = 67, .N = 300, .K = 200, .trans_b = tb, .b_shared = true},
                  .alpha = 0.75f,
                  .beta = 0.5f,
                  .batched = true});
}

// Where the CPU splits a GEMM among its kernel threads itself, by blocks of a's rows (201 of them
// over a shared b) or of the K rows of a weight gradient (1,000, with per-thread partial sums
// added to out at the end): on 1, 2 and 3 threads, whose shares are no multiple of 16, so that
// blocks differ in length; with alpha and beta, and b stored either way.
TEST_P(OpConformance, matmul_split_among_threads) {
  H2_REQUIRE_OP(Op::matmul);
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE(fmt::format("{} CPU kernel threads", n));
    CpuKernelThreads threads(n);
    for (bool tb : {false, true})
      check_matmul(*this,
                   {.d = {.S = 3, .M = 67, .N = 96, .K = 80, .trans_b = tb, .b_shared = true},
                    .alpha = 0.75f,
                    .beta = 0.5f,
                    .batched = true});
    for (float beta : {0.0f, 1.0f})
      check_matmul(
          *this,
          {.d = {.M = 160, .N = 176, .K = 1000, .trans_a = true}, .alpha = 0.5f, .beta = beta});
  }
}

TEST_P(OpConformance, matmul_model_weight_grad) {
  H2_REQUIRE_OP(Op::matmul);  // dW (688, 256) += dOut^T (688, 128) @ x (128, 256)
  check_matmul(*this, {.d = {.M = 688, .N = 256, .K = 128, .trans_a = true}, .beta = 1.0f});
}

// bf16/f16 inputs with an f32 out (how weight gradients accumulate into FP32 grads): the products
// of 16-bit values are exact in f32 and summed in f32, so the result meets f32's tolerance, which
// a result rounded to the inputs' dtype on the way (2^-9 relative for bf16) does not.
TEST_P(OpConformance, matmul_16bit_inputs_f32_out) {
  H2_REQUIRE_OP(Op::matmul);
  if (dt() == DType::f32) GTEST_SKIP() << "f32 inputs: the f32 cases above";
  auto check = [&](const ref::MatmulDims& d, float beta, float alpha = 1) {
    const Shape sa = d.trans_a ? Shape{d.K, d.M} : Shape{d.M, d.K};
    const Shape sb = d.trans_b ? Shape{d.N, d.K} : Shape{d.K, d.N};
    const auto a = rand(sa.numel()), b = rand(sb.numel());
    const auto o = rand(d.M * d.N, -1, 1, DType::f32);
    Tensor out = beta != 0 ? upload(o, {d.M, d.N}, DType::f32) : nans({d.M, d.N}, DType::f32);
    ops::matmul({.out = out,
                 .a = upload(a, sa),
                 .b = upload(b, sb),
                 .trans_a = d.trans_a,
                 .trans_b = d.trans_b,
                 .alpha = alpha,
                 .beta = beta});
    expect_close(fmt::format("{} inputs, f32 out, M={} N={} K={} trans_a={} trans_b={} alpha={} "
                             "beta={}, {} CPU kernel threads",
                             dtype_name(dt()), d.M, d.N, d.K, d.trans_a, d.trans_b, alpha, beta,
                             cpu::kernel_threads()),
                 out, ref::matmul(to_double(a), to_double(b), to_double(o), d, alpha, beta));
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check({.M = 7, .N = 5, .K = 13, .trans_a = ta, .trans_b = tb}, 0);
  // The weight gradient: dW (688, 256) += dy^T (688, 128) @ x (128, 256).
  check({.M = 688, .N = 256, .K = 128, .trans_a = true}, 1.0f);
  // Rows in blocks (as matmul_rows_in_blocks_with_alpha_beta), the f32 out written in place.
  check({.M = 201, .N = 300, .K = 200}, 1.0f);
  // A weight gradient over many tokens, where the CPU widens by blocks of K rows into out and
  // per-thread partial sums: with 1, 2 and 3 threads (blocks of 336, 256 and 336, the last one
  // short), so that a thread adds several blocks into out (1) or into its partial sum (2), and
  // other threads' partial sums are added to out (2, 3), with alpha and beta.
  for (int n : {1, 2, 3}) {
    CpuKernelThreads threads(n);
    for (float beta : {0.0f, 1.0f})
      check({.M = 160, .N = 176, .K = 1000, .trans_a = true}, beta, 0.5f);
  }
  // Mixed dtypes beyond that are refused, naming them.
  const Tensor a16 = upload(rand(4 * 3), {4, 3});
  const Tensor b32 = upload(rand(3 * 2, -1, 1, DType::f32), {3, 2}, DType::f32);
  EXPECT_THROW(ops::matmul({.out = nans({4, 2}, DType::f32), .a = a16, .b = b32}), Error);
}

}  // namespace
}  // namespace h2::test
