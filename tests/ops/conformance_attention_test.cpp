// Conformance of causal grouped-query attention, forward and backward: T = 1, T = 130 (not a
// multiple of any block size), T = 600 (keys in more than one of the CPU's 512-key chunks, so its
// online softmax rescales earlier chunks' partial sums), Hkv = 1 and Hkv = H, odd head dim,
// explicit scale, T = 0, q/k/v and every output as slices (of a fused qkv tensor), and the model
// shape (B=2, T=64, H=4, Hkv=2, D=64). The backward gets out and lse from the double reference
// (rounded to their storage dtypes) so that it is judged on its own; D_i = dout . out uses that
// same stored out in the reference.
#include <fmt/format.h>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"
#include "tests/ops/cpu_kernel_threads.h"

namespace h2::test {
namespace {

std::string describe(const ref::AttnDims& d) {
  return fmt::format("(B={}, T={}, H={}, Hkv={}, D={}) scale={}", d.B, d.T, d.H, d.Hkv, d.D,
                     d.scale);
}

struct AttnInputs {
  std::vector<float> q, k, v;
  Tensor tq, tk, tv;
};

// q, k in [-2, 2] (peaked softmax), v in [-1, 1]. fused: the three are head slices of one
// (B, T, H + 2 Hkv, D) tensor, as a fused qkv projection produces them.
AttnInputs make_inputs(OpConformance& t, const ref::AttnDims& d, bool fused) {
  AttnInputs in;
  in.q = t.rand(d.B * d.T * d.H * d.D, -2, 2);
  in.k = t.rand(d.B * d.T * d.Hkv * d.D, -2, 2);
  in.v = t.rand(d.B * d.T * d.Hkv * d.D);
  if (!fused) {
    in.tq = t.upload(in.q, {d.B, d.T, d.H, d.D});
    in.tk = t.upload(in.k, {d.B, d.T, d.Hkv, d.D});
    in.tv = t.upload(in.v, {d.B, d.T, d.Hkv, d.D});
    return in;
  }
  int64_t W = d.H + 2 * d.Hkv, row = d.D;
  std::vector<float> qkv(static_cast<size_t>(d.B * d.T * W * row));
  for (int64_t bt = 0; bt < d.B * d.T; ++bt) {
    float* dst = qkv.data() + bt * W * row;
    std::copy_n(in.q.begin() + bt * d.H * row, d.H * row, dst);
    std::copy_n(in.k.begin() + bt * d.Hkv * row, d.Hkv * row, dst + d.H * row);
    std::copy_n(in.v.begin() + bt * d.Hkv * row, d.Hkv * row, dst + (d.H + d.Hkv) * row);
  }
  Tensor base = t.upload(qkv, {d.B, d.T, W, d.D});
  in.tq = base.slice(2, 0, d.H);
  in.tk = base.slice(2, d.H, d.H + d.Hkv);
  in.tv = base.slice(2, d.H + d.Hkv, W);
  return in;
}

void check_fwd(OpConformance& t, const ref::AttnDims& d, bool fused = false) {
  AttnInputs in = make_inputs(t, d, fused);
  // fused: out is a head slice too (of a wider tensor), and lse a slice of a longer sequence's.
  const Tensor out_parent = t.nans({d.B, d.T, d.H + (fused ? 1 : 0), d.D}, t.dt());
  const Tensor lse_parent = t.nans({d.B, d.H, d.T + (fused ? 3 : 0)}, DType::f32);
  const Tensor out = out_parent.slice(2, fused ? 1 : 0, d.H + (fused ? 1 : 0));
  const Tensor lse = lse_parent.slice(2, 0, d.T);
  ops::attention_fwd(
      {.out = out, .lse = lse, .q = in.tq, .k = in.tk, .v = in.tv, .scale = float(d.scale)});
  ref::AttnOut want = ref::attention_fwd(to_double(in.q), to_double(in.k), to_double(in.v), d);
  std::string tag = fmt::format(" {}{}", describe(d), fused ? " fused qkv" : "");
  t.expect_close("out" + tag, out, want.out);
  t.expect_close("lse" + tag, lse, want.lse);
  if (fused) {
    t.expect_untouched("out's other head" + tag, out_parent.slice(2, 0, 1));
    t.expect_untouched("lse past T" + tag, lse_parent.slice(2, d.T, d.T + 3));
  }
}

void check_bwd(OpConformance& t, const ref::AttnDims& d, bool fused = false) {
  AttnInputs in = make_inputs(t, d, fused);
  auto dout = t.rand(d.B * d.T * d.H * d.D);
  ref::Vec q = to_double(in.q), k = to_double(in.k), v = to_double(in.v);
  ref::AttnOut fwd = ref::attention_fwd(q, k, v, d);
  // The saved tensors as a forward kernel would have stored them.
  std::vector<float> out_saved(fwd.out.size()), lse_saved(fwd.lse.begin(), fwd.lse.end());
  for (size_t i = 0; i < out_saved.size(); ++i) out_saved[i] = round_to(t.dt(), float(fwd.out[i]));
  Tensor dq = t.nans({d.B, d.T, d.H, d.D}, t.dt());
  Tensor dk = t.nans({d.B, d.T, d.Hkv, d.D}, t.dt()), dv = t.nans({d.B, d.T, d.Hkv, d.D}, t.dt());
  if (fused) {  // the gradients too: head slices of one tensor, written back through views
    Tensor dqkv = t.nans({d.B, d.T, d.H + 2 * d.Hkv, d.D}, t.dt());
    dq = dqkv.slice(2, 0, d.H);
    dk = dqkv.slice(2, d.H, d.H + d.Hkv);
    dv = dqkv.slice(2, d.H + d.Hkv, d.H + 2 * d.Hkv);
  }
  ops::attention_bwd({.dq = dq,
                      .dk = dk,
                      .dv = dv,
                      .dout = t.upload(dout, {d.B, d.T, d.H, d.D}),
                      .q = in.tq,
                      .k = in.tk,
                      .v = in.tv,
                      .out = t.upload(out_saved, {d.B, d.T, d.H, d.D}),
                      .lse = t.upload(lse_saved, {d.B, d.H, d.T}, DType::f32),
                      .scale = float(d.scale)});
  ref::AttnGrads want = ref::attention_bwd(to_double(dout), q, k, v, to_double(out_saved), d);
  std::string tag = fmt::format(" {}{}", describe(d), fused ? " fused qkv" : "");
  t.expect_close("dq" + tag, dq, want.dq);
  t.expect_close("dk" + tag, dk, want.dk);
  t.expect_close("dv" + tag, dv, want.dv);
}

constexpr ref::AttnDims kT1{.B = 2, .T = 1, .H = 4, .Hkv = 2, .D = 16};
constexpr ref::AttnDims kT130{.B = 1, .T = 130, .H = 2, .Hkv = 1, .D = 32};
constexpr ref::AttnDims kT600{.B = 1, .T = 600, .H = 2, .Hkv = 1, .D = 16};
constexpr ref::AttnDims kMqa{.B = 2, .T = 33, .H = 4, .Hkv = 1, .D = 16};
constexpr ref::AttnDims kMha{.B = 1, .T = 13, .H = 4, .Hkv = 4, .D = 8};
constexpr ref::AttnDims kOddD{.B = 1, .T = 7, .H = 3, .Hkv = 1, .D = 5};
constexpr ref::AttnDims kScale{.B = 1, .T = 9, .H = 2, .Hkv = 2, .D = 8, .scale = 0.3};
constexpr ref::AttnDims kT0{.B = 2, .T = 0, .H = 2, .Hkv = 1, .D = 8};
constexpr ref::AttnDims kFused{.B = 2, .T = 6, .H = 4, .Hkv = 2, .D = 8};
constexpr ref::AttnDims kModel{.B = 2, .T = 64, .H = 4, .Hkv = 2, .D = 64};

TEST_P(OpConformance, attention_fwd_T1) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kT1);
}
TEST_P(OpConformance, attention_fwd_T130) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kT130);
}
TEST_P(OpConformance, attention_fwd_T600) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kT600);
}
TEST_P(OpConformance, attention_fwd_Hkv1) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kMqa);
}
TEST_P(OpConformance, attention_fwd_Hkv_eq_H) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kMha);
}
TEST_P(OpConformance, attention_fwd_odd_D) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kOddD);
}
TEST_P(OpConformance, attention_fwd_scale) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kScale);
}
TEST_P(OpConformance, attention_fwd_T0) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kT0);
}
TEST_P(OpConformance, attention_fwd_fused_qkv) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kFused, true);
}
TEST_P(OpConformance, attention_fwd_model) {
  H2_REQUIRE_OP(Op::attention_fwd);
  check_fwd(*this, kModel);
}

TEST_P(OpConformance, attention_bwd_T1) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kT1);
}
TEST_P(OpConformance, attention_bwd_T130) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kT130);
}
TEST_P(OpConformance, attention_bwd_T600) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kT600);
}
TEST_P(OpConformance, attention_bwd_Hkv1) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kMqa);
}
TEST_P(OpConformance, attention_bwd_Hkv_eq_H) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kMha);
}
TEST_P(OpConformance, attention_bwd_odd_D) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kOddD);
}
TEST_P(OpConformance, attention_bwd_scale) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kScale);
}
TEST_P(OpConformance, attention_bwd_T0) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kT0);
}
TEST_P(OpConformance, attention_bwd_fused_qkv) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kFused, true);
}
TEST_P(OpConformance, attention_bwd_model) {
  H2_REQUIRE_OP(Op::attention_bwd);
  check_bwd(*this, kModel);
}

// On 1, 2 and 3 CPU kernel threads: each thread takes a contiguous run of heads (batch entries
// times heads, or times kv heads backward) where they share out evenly, and a dynamic schedule
// otherwise. (B=3, H=2, Hkv=1): 6 heads split among 1, 2, 3 threads, 3 kv heads among 1 and 3;
// (B=2, H=2, Hkv=2): 4 of either among 1 and 2.
TEST_P(OpConformance, attention_split_among_threads) {
  H2_REQUIRE_OP(Op::attention_fwd);
  H2_REQUIRE_OP(Op::attention_bwd);
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE(fmt::format("{} CPU kernel threads", n));
    CpuKernelThreads threads(n);
    // T = 600: the forward's whole-head keys (heads split evenly) read from a second key chunk,
    // and on 2 threads the second starts in the middle of a kv head's group.
    for (const ref::AttnDims& d : {ref::AttnDims{.B = 3, .T = 70, .H = 2, .Hkv = 1, .D = 8},
                                   ref::AttnDims{.B = 2, .T = 70, .H = 2, .Hkv = 2, .D = 8},
                                   ref::AttnDims{.B = 1, .T = 600, .H = 4, .Hkv = 1, .D = 8}}) {
      check_fwd(*this, d);
      check_bwd(*this, d);
    }
  }
}

// The first query sees only the first key: its output is v[t=0] of its kv head (softmax weight 1).
TEST_P(OpConformance, attention_fwd_first_query_attends_itself) {
  H2_REQUIRE_OP(Op::attention_fwd);
  ref::AttnDims d{.B = 2, .T = 5, .H = 4, .Hkv = 2, .D = 8};
  AttnInputs in = make_inputs(*this, d, false);
  Tensor out = nans({d.B, d.T, d.H, d.D}, dt());
  Tensor lse = nans({d.B, d.H, d.T}, DType::f32);
  ops::attention_fwd({.out = out, .lse = lse, .q = in.tq, .k = in.tk, .v = in.tv});
  std::vector<float> got = tensor_to_floats(out.select(1, 0));  // (B, H, D)
  std::vector<float> want;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.H; ++h) {
      auto row = in.v.begin() + (b * d.T * d.Hkv + h / (d.H / d.Hkv)) * d.D;
      want.insert(want.end(), row, row + d.D);
    }
  expect_close("out[:, 0] vs v[:, 0] of each head's kv head", got, to_double(want), {d.B, d.H, d.D},
               dt(), default_tolerance(dt()));
}

}  // namespace
}  // namespace h2::test
