// Conformance of the per-token layer ops: embedding (gather is bit-exact; the scatter-add must
// accumulate repeated ids and leave unnamed rows untouched), rms_norm forward/backward (with and
// without dweight accumulation) and swiglu forward/backward, over edge, non-contiguous and model
// shapes (B=2, T=64, C=256, ffn 688, vocab 1000).
#include <fmt/format.h>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"

namespace h2::test {
namespace {

constexpr Tolerance kExact{0, 0};

void check_embedding_fwd(OpConformance& t, int64_t V, int64_t C, const Shape& ids_shape,
                         DType id_dtype, bool transposed_table = false) {
  auto table = t.rand(V * C);
  auto ids = t.rand_ids(ids_shape.numel(), V);
  Shape out_shape = ids_shape;
  out_shape.push_back(C);
  Tensor out = t.nans(out_shape, t.dt());
  Tensor tt = transposed_table ? t.transposed(table, V, C, t.dt()) : t.upload(table, {V, C});
  ops::embedding_fwd({.out = out, .table = tt, .ids = t.ids(ids, ids_shape, id_dtype)});
  t.expect_close(fmt::format("out ({} ids)", dtype_name(id_dtype)), out,
                 ref::embedding_fwd(to_double(table), ids, C), kExact);
}

TEST_P(OpConformance, embedding_fwd_small_i32_i64) {
  H2_REQUIRE_OP(Op::embedding_fwd);
  check_embedding_fwd(*this, 11, 7, {3, 5}, DType::i32);
  check_embedding_fwd(*this, 11, 7, {3, 5}, DType::i64);
  check_embedding_fwd(*this, 1, 1, {1}, DType::i64);
  check_embedding_fwd(*this, 9, 5, {4}, DType::i32, true);
}

TEST_P(OpConformance, embedding_fwd_zero_size) {
  H2_REQUIRE_OP(Op::embedding_fwd);
  check_embedding_fwd(*this, 11, 7, {0}, DType::i32);
  check_embedding_fwd(*this, 11, 0, {2, 3}, DType::i64);
}

TEST_P(OpConformance, embedding_fwd_model) {
  H2_REQUIRE_OP(Op::embedding_fwd);
  check_embedding_fwd(*this, 1000, 256, {2, 64}, DType::i32);
}

void check_embedding_bwd(OpConformance& t, int64_t V, int64_t C, const std::vector<int64_t>& ids,
                         DType id_dtype) {
  int64_t N = int64_t(ids.size());
  auto dtable = t.rand(V * C), dout = t.rand(N * C);
  Tensor td = t.upload(dtable, {V, C});
  ops::embedding_bwd(
      {.dtable = td, .dout = t.upload(dout, {N, C}), .ids = t.ids(ids, {N}, id_dtype)});
  ref::Vec want = to_double(dtable);
  ref::embedding_bwd(want, to_double(dout), ids, C);
  std::vector<float> got = tensor_to_floats(td);
  t.expect_close("dtable", got, want, td.shape(), t.dt(), default_tolerance(t.dt()));
  // Rows no id names must be bit-identical to what they were.
  std::vector<bool> named(size_t(V), false);
  for (int64_t id : ids) named[size_t(id)] = true;
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C && !named[size_t(v)]; ++c)
      ASSERT_EQ(got[size_t(v * C + c)], dtable[size_t(v * C + c)])
          << t.context() << ": dtable row " << v << " is named by no id but changed";
}

TEST_P(OpConformance, embedding_bwd_repeated_ids_accumulate) {
  H2_REQUIRE_OP(Op::embedding_bwd);
  check_embedding_bwd(*this, 11, 7, {3, 0, 3, 10, 3, 5, 0, 3, 3}, DType::i32);
  check_embedding_bwd(*this, 6, 13, {2, 2, 2, 2}, DType::i64);
}

TEST_P(OpConformance, embedding_bwd_zero_size) {
  H2_REQUIRE_OP(Op::embedding_bwd);
  check_embedding_bwd(*this, 5, 3, {}, DType::i32);
}

TEST_P(OpConformance, embedding_bwd_model) {
  H2_REQUIRE_OP(Op::embedding_bwd);
  check_embedding_bwd(*this, 1000, 256, rand_ids(128, 1000), DType::i64);
}

// rms_norm on x of `shape` (last dim C); noncontiguous: x is a padded view. A large eps (0.5 with
// mean(x^2) ~ 1.3) makes a kernel that drops or misplaces eps fail.
void check_rms_norm_fwd(OpConformance& t, const Shape& shape, bool noncontiguous = false,
                        float eps = 1e-5f) {
  int64_t C = shape[shape.rank() - 1];
  auto x = t.rand(shape.numel(), -2, 2), w = t.rand(C, 0.5f, 1.5f);
  Tensor out = t.nans(shape, t.dt());
  Shape rshape(std::span<const int64_t>(shape.begin(), shape.end() - 1));
  Tensor rstd = t.nans(rshape, DType::f32);
  ops::rms_norm_fwd({.out = out,
                     .rstd = rstd,
                     .x = noncontiguous ? t.padded(x, shape, t.dt()) : t.upload(x, shape),
                     .weight = t.upload(w, {C}),
                     .eps = eps});
  ref::RmsNormOut want = ref::rms_norm_fwd(to_double(x), to_double(w), C, double(eps));
  std::string tag = fmt::format(" {} eps={}", shape.str(), eps);
  t.expect_close("out" + tag, out, want.out);
  t.expect_close("rstd" + tag, rstd, want.rstd);
}

TEST_P(OpConformance, rms_norm_fwd_shapes) {
  H2_REQUIRE_OP(Op::rms_norm_fwd);
  for (Shape s : {Shape{7, 13}, Shape{1, 1}, Shape{0, 16}}) check_rms_norm_fwd(*this, s);
  check_rms_norm_fwd(*this, {5, 24}, true);
  check_rms_norm_fwd(*this, {3, 10}, false, 0.5f);
}

TEST_P(OpConformance, rms_norm_fwd_model) {
  H2_REQUIRE_OP(Op::rms_norm_fwd);
  check_rms_norm_fwd(*this, {2, 64, 256});
}

void check_rms_norm_bwd(OpConformance& t, const Shape& shape, bool accumulate,
                        bool noncontiguous = false, float eps_f = 1e-5f) {
  int64_t C = shape[shape.rank() - 1];
  Shape rshape(std::span<const int64_t>(shape.begin(), shape.end() - 1));
  auto x = t.rand(shape.numel(), -2, 2), w = t.rand(C, 0.5f, 1.5f);
  auto dout = t.rand(shape.numel()), dw0 = t.rand(C);
  ref::Vec xd = to_double(x), wd = to_double(w);
  double eps = double(eps_f);  // reaches the kernel only through the saved rstd
  ref::RmsNormOut fwd = ref::rms_norm_fwd(xd, wd, C, eps);
  std::vector<float> rstd(fwd.rstd.begin(), fwd.rstd.end());  // the saved f32 rstd
  Tensor dx = t.nans(shape, t.dt());
  Tensor dweight = accumulate ? t.upload(dw0, {C}) : t.nans({C}, t.dt());
  ops::rms_norm_bwd({.dx = dx,
                     .dweight = dweight,
                     .dout = noncontiguous ? t.padded(dout, shape, t.dt()) : t.upload(dout, shape),
                     .x = noncontiguous ? t.transposed(x, shape[0], C, t.dt()) : t.upload(x, shape),
                     .weight = t.upload(w, {C}),
                     .rstd = t.upload(rstd, rshape, DType::f32),
                     .accumulate = accumulate});
  ref::RmsNormGrads want = ref::rms_norm_bwd(to_double(dout), xd, wd, C, eps);
  if (accumulate)
    for (int64_t c = 0; c < C; ++c) want.dweight[size_t(c)] += dw0[size_t(c)];
  std::string tag = fmt::format(" {} accumulate={}", shape.str(), accumulate);
  t.expect_close("dx" + tag, dx, want.dx);
  t.expect_close("dweight" + tag, dweight, want.dweight);
}

TEST_P(OpConformance, rms_norm_bwd_shapes) {
  H2_REQUIRE_OP(Op::rms_norm_bwd);
  for (Shape s : {Shape{7, 13}, Shape{1, 1}, Shape{0, 16}}) check_rms_norm_bwd(*this, s, false);
  check_rms_norm_bwd(*this, {6, 20}, false, true);
  check_rms_norm_bwd(*this, {3, 10}, false, false, 0.5f);
}

TEST_P(OpConformance, rms_norm_bwd_accumulate_adds) {
  H2_REQUIRE_OP(Op::rms_norm_bwd);
  check_rms_norm_bwd(*this, {7, 13}, true);
  check_rms_norm_bwd(*this, {0, 9}, true);  // no rows: dweight keeps its values
  check_rms_norm_bwd(*this, {5, 11}, true, true);
}

TEST_P(OpConformance, rms_norm_bwd_model) {
  H2_REQUIRE_OP(Op::rms_norm_bwd);
  check_rms_norm_bwd(*this, {2, 64, 256}, false);
  check_rms_norm_bwd(*this, {128, 256}, true);
}

// swiglu on (N, F); fused: gate and up are the two halves of one (N, 2F) projection output, and
// the outputs column slices.
void check_swiglu(OpConformance& t, Op op, const Shape& shape, bool fused = false) {
  int64_t F = shape[shape.rank() - 1], N = F > 0 ? shape.numel() / F : 0;
  auto gate = t.rand(shape.numel(), -6, 6), up = t.rand(shape.numel(), -2, 2);
  auto dout = t.rand(shape.numel());
  Tensor tg = t.upload(gate, shape), tu = t.upload(up, shape);
  if (fused) {
    std::vector<float> both(static_cast<size_t>(2 * N * F));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t f = 0; f < F; ++f) {
        both[size_t(n * 2 * F + f)] = gate[size_t(n * F + f)];
        both[size_t(n * 2 * F + F + f)] = up[size_t(n * F + f)];
      }
    Tensor base = t.upload(both, {N, 2 * F});
    tg = base.slice(1, 0, F);
    tu = base.slice(1, F, 2 * F);
  }
  std::string tag = fmt::format(" {}{}", shape.str(), fused ? " fused" : "");
  if (op == Op::swiglu_fwd) {
    // fused: out a column slice too, of a wider tensor, whose other columns stay as they were.
    const Tensor wide = t.nans({N, F + 3}, t.dt());
    Tensor out = fused ? wide.slice(1, 2, F + 2) : t.nans(shape, t.dt());
    ops::swiglu_fwd({.out = out, .gate = tg, .up = tu});
    t.expect_close("out" + tag, out, ref::swiglu_fwd(to_double(gate), to_double(up)));
    if (fused) {
      t.expect_untouched("columns before out" + tag, wide.slice(1, 0, 2));
      t.expect_untouched("column after out" + tag, wide.slice(1, F + 2, F + 3));
    }
  } else {
    Tensor dgate = t.nans(shape, t.dt()), dup = t.nans(shape, t.dt());
    if (fused) {  // the halves of one (N, 2F) gradient, written back through views
      Tensor both = t.nans({N, 2 * F}, t.dt());
      dgate = both.slice(1, 0, F);
      dup = both.slice(1, F, 2 * F);
    }
    ops::swiglu_bwd(
        {.dgate = dgate, .dup = dup, .dout = t.upload(dout, shape), .gate = tg, .up = tu});
    ref::SwigluGrads want = ref::swiglu_bwd(to_double(dout), to_double(gate), to_double(up));
    t.expect_close("dgate" + tag, dgate, want.dgate);
    t.expect_close("dup" + tag, dup, want.dup);
  }
}

TEST_P(OpConformance, swiglu_fwd_shapes) {
  H2_REQUIRE_OP(Op::swiglu_fwd);
  for (Shape s : {Shape{7, 13}, Shape{0, 8}, Shape{1, 1}}) check_swiglu(*this, Op::swiglu_fwd, s);
  check_swiglu(*this, Op::swiglu_fwd, {5, 9}, true);
  check_swiglu(*this, Op::swiglu_fwd, {3, 1100}, true);  // views of more than one kChunk a row
  check_swiglu(*this, Op::swiglu_fwd, {2, 64, 688});
}

TEST_P(OpConformance, swiglu_bwd_shapes) {
  H2_REQUIRE_OP(Op::swiglu_bwd);
  for (Shape s : {Shape{7, 13}, Shape{0, 8}, Shape{1, 1}}) check_swiglu(*this, Op::swiglu_bwd, s);
  check_swiglu(*this, Op::swiglu_bwd, {5, 9}, true);
  check_swiglu(*this, Op::swiglu_bwd, {3, 1100}, true);
  check_swiglu(*this, Op::swiglu_bwd, {2, 64, 688});
}

}  // namespace
}  // namespace h2::test
