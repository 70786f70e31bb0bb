// Conformance of the data-movement and elementwise ops: copy, fill (both take raw strides and
// must be bit-exact: conversion is one round-to-nearest-even), add, sum and sum_squares, over
// 0-size, single-element, odd, non-contiguous and model shapes on every device and dtype.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"

namespace h2::test {
namespace {

constexpr Tolerance kExact{0, 0};

ref::Vec rounded(DType dtype, const std::vector<float>& v) {
  ref::Vec r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_to(dtype, v[i]);
  return r;
}

TEST_P(OpConformance, copy_same_dtype_7x13) {
  H2_REQUIRE_OP(Op::copy);
  auto x = rand(7 * 13);
  Tensor out = nans({7, 13}, dt());
  ops::copy({.out = out, .in = upload(x, {7, 13})});
  expect_close("out", out, to_double(x), kExact);
}

TEST_P(OpConformance, copy_convert_every_pair) {
  H2_REQUIRE_OP(Op::copy);
  // Unrounded f32 values with a wide exponent range, converted from and to the target dtype.
  auto wide = rand(5 * 9, -3, 3, DType::f32);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] *= std::ldexp(1.0f, int(i % 9) - 4);
  for (DType other : {DType::f32, DType::bf16, DType::f16}) {
    if (!supported(Op::copy, other)) continue;
    std::vector<float> src(wide.size());
    for (size_t i = 0; i < src.size(); ++i) src[i] = round_to(other, wide[i]);
    Tensor out = nans({5, 9}, dt());
    ops::copy({.out = out, .in = upload(src, {5, 9}, other)});
    expect_close(fmt::format("out from {}", dtype_name(other)), out, rounded(dt(), src), kExact);
  }
}

TEST_P(OpConformance, copy_transposed_in) {
  H2_REQUIRE_OP(Op::copy);
  auto x = rand(7 * 13);
  Tensor out = nans({7, 13}, dt());
  ops::copy({.out = out, .in = transposed(x, 7, 13, dt())});
  expect_close("out", out, to_double(x), kExact);
}

// One-byte elements (FP8 codes, which a linear layer transposes as u8 to take W^T or dy^T) from
// a transposed view: whole 16 x 16 tiles, ragged edges and a single row or column, into rows of a
// wider matrix whose other bytes must stay as they were. The bytes are E4M3 codes of exact
// values, so they read back as those values.
TEST_P(OpConformance, copy_transposed_bytes) {
  H2_REQUIRE(Op::copy, DType::u8);
  if (dt() != DType::f32) GTEST_SKIP() << "one-byte data: once per device";
  auto bytes = [&](const Tensor& codes) {
    return Tensor::from_blob(codes.data(), codes.shape(), DType::u8, dev());
  };
  for (auto [R, C] : {std::pair<int64_t, int64_t>{48, 32}, {37, 53}, {1, 17}, {17, 1}, {130, 70}}) {
    std::vector<float> x(size_t(R * C)), xt(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int64_t(i * 37 % 29) - 14) * 0.5f;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) xt[size_t(c * R + r)] = x[size_t(r * C + c)];
    const std::vector<float> background(size_t(R * (C + 9)), 96.0f);
    Tensor base = upload(background, {R, C + 9}, DType::f8e4m3);
    Tensor in = upload(xt, {C, R}, DType::f8e4m3);
    ops::copy({.out = bytes(base).slice(1, 4, 4 + C), .in = bytes(in).transpose(0, 1)});
    ref::Vec want(background.begin(), background.end());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) want[size_t(r * (C + 9) + 4 + c)] = x[size_t(r * C + c)];
    expect_close(fmt::format("{} x {} into a {}-wide matrix", R, C, C + 9), base, want, kExact);
  }
}

TEST_P(OpConformance, copy_permuted_3d_in) {
  H2_REQUIRE_OP(Op::copy);
  auto x = rand(3 * 4 * 5);  // (3, 4, 5) viewed as (4, 5, 3)
  Tensor out = nans({4, 5, 3}, dt());
  ops::copy({.out = out, .in = upload(x, {3, 4, 5}).permute({1, 2, 0})});
  ref::Vec want(x.size());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        want[size_t((j * 5 + k) * 3 + i)] = x[size_t((i * 4 + j) * 5 + k)];
  expect_close("out", out, want, kExact);
}

TEST_P(OpConformance, copy_strided_out_leaves_gaps) {
  H2_REQUIRE_OP(Op::copy);
  auto x = rand(6 * 5);
  Tensor base = nans({6, 8}, dt());
  ops::copy({.out = base.slice(1, 2, 7), .in = transposed(x, 6, 5, dt())});
  ref::Vec want(48, std::numeric_limits<double>::quiet_NaN());
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 5; ++c) want[size_t(r * 8 + 2 + c)] = x[size_t(r * 5 + c)];
  expect_close("base of out (gaps stay NaN)", base, want, kExact);
}

TEST_P(OpConformance, copy_zero_size_and_single) {
  H2_REQUIRE_OP(Op::copy);
  ops::copy({.out = Tensor::empty({0, 5}, dt(), dev()), .in = upload({}, {0, 5})});
  auto x = rand(1);
  Tensor out = nans({1}, dt());
  ops::copy({.out = out, .in = upload(x, {1})});
  expect_close("out", out, to_double(x), kExact);
}

TEST_P(OpConformance, fill_7x13) {
  H2_REQUIRE_OP(Op::fill);
  for (double value : {0.1, -2.3125, 0.0}) {
    Tensor out = nans({7, 13}, dt());
    ops::fill({.out = out, .value = value});
    expect_close(fmt::format("out (value {})", value), out,
                 ref::Vec(91, round_to(dt(), float(value))), kExact);
  }
}

TEST_P(OpConformance, fill_strided_leaves_gaps) {
  H2_REQUIRE_OP(Op::fill);
  Tensor base = nans({5, 9}, dt());
  ops::fill({.out = base.slice(1, 1, 8).transpose(0, 1), .value = 1.5});
  ref::Vec want(45, std::numeric_limits<double>::quiet_NaN());
  for (int r = 0; r < 5; ++r)
    for (int c = 1; c < 8; ++c) want[size_t(r * 9 + c)] = 1.5;
  expect_close("base of out (gaps stay NaN)", base, want, kExact);
}

TEST_P(OpConformance, fill_zero_size_and_single) {
  H2_REQUIRE_OP(Op::fill);
  ops::fill({.out = Tensor::empty({3, 0}, dt(), dev()), .value = 1});
  Tensor out = nans({1}, dt());
  ops::fill({.out = out, .value = -7});
  expect_close("out", out, {-7.0}, kExact);
}

// out = alpha*a + beta*b on a few shapes; b_kind: 0 contiguous, 1 undefined.
void check_add(OpConformance& t, const Shape& shape, float alpha, float beta, bool with_b) {
  auto a = t.rand(shape.numel()), b = t.rand(shape.numel());
  Tensor out = t.nans(shape, t.dt());
  ops::add({.out = out,
            .a = t.upload(a, shape),
            .b = with_b ? t.upload(b, shape) : Tensor(),
            .alpha = alpha,
            .beta = beta});
  ref::Vec rb = to_double(b);
  t.expect_close("out", out, ref::add(to_double(a), with_b ? &rb : nullptr, alpha, beta));
}

TEST_P(OpConformance, add_7x13) {
  H2_REQUIRE_OP(Op::add);
  check_add(*this, {7, 13}, 0.5f, -2.0f, true);
}

TEST_P(OpConformance, add_b_undefined) {
  H2_REQUIRE_OP(Op::add);
  check_add(*this, {3, 11}, 3.0f, 1.0f, false);
}

TEST_P(OpConformance, add_zero_size_and_single) {
  H2_REQUIRE_OP(Op::add);
  check_add(*this, {0, 4}, 1.0f, 1.0f, true);
  check_add(*this, {1}, 1.0f, 1.0f, true);
}

TEST_P(OpConformance, add_model_2x64x256) {
  H2_REQUIRE_OP(Op::add);
  check_add(*this, {2, 64, 256}, 1.0f, 1.0f, true);
}

TEST_P(OpConformance, add_out_aliases_a_or_b) {
  H2_REQUIRE_OP(Op::add);
  auto a = rand(5 * 7), b = rand(5 * 7);
  ref::Vec ra = to_double(a), rb = to_double(b);
  Tensor ta = upload(a, {5, 7}), tb = upload(b, {5, 7});
  ops::add({.out = ta, .a = ta, .b = tb, .alpha = 1, .beta = 0.25f});  // residual: a += b/4
  expect_close("out == a", ta, ref::add(ra, &rb, 1, 0.25));
  Tensor ta2 = upload(a, {5, 7});
  ops::add({.out = tb, .a = ta2, .b = tb, .alpha = -1, .beta = 2});  // gradient accumulation
  expect_close("out == b", tb, ref::add(ra, &rb, -1, 2));
}

TEST_P(OpConformance, add_noncontiguous) {
  H2_REQUIRE_OP(Op::add);
  auto a = rand(6 * 9), b = rand(6 * 9);
  Tensor base = nans({6, 12}, dt());
  ops::add({.out = base.slice(1, 0, 9),
            .a = transposed(a, 6, 9, dt()),
            .b = padded(b, {6, 9}, dt()),
            .alpha = 1.5f,
            .beta = -1});
  ref::Vec rb = to_double(b), sum = ref::add(to_double(a), &rb, 1.5, -1);
  ref::Vec want(72, std::numeric_limits<double>::quiet_NaN());
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 9; ++c) want[size_t(r * 12 + c)] = sum[size_t(r * 9 + c)];
  expect_close("base of out (gaps stay NaN)", base, want);
}

// sum and sum_squares of `in` into a one-element f32 tensor.
void check_sum(OpConformance& t, Op op, const Tensor& in, const ref::Vec& values) {
  Tensor out = t.nans({1, 1}, DType::f32);
  if (op == Op::sum)
    ops::sum({.out = out, .in = in});
  else
    ops::sum_squares({.out = out, .in = in});
  double want = op == Op::sum ? ref::sum(values) : ref::sum_squares(values);
  t.expect_close(std::string(op_name(op)), out, {want});
}

TEST_P(OpConformance, sum_shapes) {
  H2_REQUIRE_OP(Op::sum);
  for (Shape s : {Shape{7, 13}, Shape{0, 3}, Shape{1}, Shape{2, 64, 256}}) {
    auto x = rand(s.numel());
    check_sum(*this, Op::sum, upload(x, s), to_double(x));
  }
  auto x = rand(9 * 14);
  check_sum(*this, Op::sum, transposed(x, 9, 14, dt()), to_double(x));
}

TEST_P(OpConformance, sum_squares_shapes) {
  H2_REQUIRE_OP(Op::sum_squares);
  for (Shape s : {Shape{7, 13}, Shape{0, 3}, Shape{1}, Shape{2, 64, 256}}) {
    auto x = rand(s.numel());
    check_sum(*this, Op::sum_squares, upload(x, s), to_double(x));
  }
  auto x = rand(9 * 14);
  check_sum(*this, Op::sum_squares, padded(x, {9, 14}, dt()), to_double(x));
}

// 1..n with n exactly representable in the dtype: the double-accumulated result rounded to f32 is
// exact (n(n+1)/2 and n(n+1)(2n+1)/6 both fit f32's 24-bit significand for these n).
TEST_P(OpConformance, sum_analytic_1_to_n) {
  H2_REQUIRE_OP(Op::sum);
  H2_REQUIRE_OP(Op::sum_squares);
  int64_t n = dt() == DType::f32 ? 4096 : dt() == DType::f16 ? 2048 : 256;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(n - i);  // descending: big terms first
  Tensor in = upload(x, {n});
  Tensor s = nans({1}, DType::f32), sq = nans({1}, DType::f32);
  ops::sum({.out = s, .in = in});
  ops::sum_squares({.out = sq, .in = in});
  double nn = double(n);
  EXPECT_EQ(tensor_to_floats(s)[0], float(nn * (nn + 1) / 2)) << context() << " n=" << n;
  EXPECT_EQ(tensor_to_floats(sq)[0], float(nn * (nn + 1) * (2 * nn + 1) / 6))
      << context() << " n=" << n;
}

}  // namespace
}  // namespace h2::test
