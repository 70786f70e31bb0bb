// Conformance of rotary embedding (Hugging Face rotate_half): forward and inverse rotation on edge
// and model shapes, a q slice of a fused qkv tensor (non-contiguous), out aliasing x, in place
// on the q and k heads of a fused qkv tensor, an offset sequence equal to the slice of a longer
// one, tables kept per parameter, and rope_bwd(rope_fwd(x)) == x. Positions stay below ~100 so
// that FP32 angle arithmetic (error ~ 1e-7 * position) fits the f32 tolerance.
#include <fmt/format.h>

#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/conformance.h"

namespace h2::test {
namespace {

struct RopeCase {
  int64_t B, T, H, D;
  int64_t offset = 0;
  float theta = 10000;
  RopeScaling scaling;  // Llama 3 frequency scaling when factor > 0
};

std::string describe(const RopeCase& c) {
  return fmt::format("(B={}, T={}, H={}, D={}) offset={} theta={}{}", c.B, c.T, c.H, c.D, c.offset,
                     c.theta,
                     c.scaling.enabled() ? fmt::format(" llama3 x{}", c.scaling.factor) : "");
}

void run_rope(Op op, const Tensor& out, const Tensor& x, const RopeCase& c) {
  RopeArgs args{
      .out = out, .x = x, .theta = c.theta, .position_offset = c.offset, .scaling = c.scaling};
  if (op == Op::rope_fwd)
    ops::rope_fwd(args);
  else
    ops::rope_bwd(args);
}

// fused: x is the q part (first H heads) of a (B, T, H + 2, D) fused qkv tensor.
void check_rope(OpConformance& t, Op op, const RopeCase& c, bool fused = false) {
  Shape shape{c.B, c.T, c.H, c.D};
  auto x = t.rand(shape.numel());
  Tensor tx = t.upload(x, shape);
  if (fused) {
    int64_t W = c.H + 2;
    std::vector<float> qkv(size_t(c.B * c.T * W * c.D), 0.5f);
    for (int64_t bt = 0; bt < c.B * c.T; ++bt)
      std::copy_n(x.begin() + bt * c.H * c.D, c.H * c.D, qkv.begin() + bt * W * c.D);
    tx = t.upload(qkv, {c.B, c.T, W, c.D}).slice(2, 0, c.H);
  }
  Tensor out = t.nans(shape, t.dt());
  run_rope(op, out, tx, c);
  int direction = op == Op::rope_fwd ? 1 : -1;
  t.expect_close(fmt::format("out {}{}", describe(c), fused ? " fused qkv" : ""), out,
                 ref::rope(to_double(x), c.B, c.T, c.H, c.D, c.theta, c.offset, direction,
                           c.scaling.enabled()
                               ? ref::llama3_inv_freq(
                                     c.D, c.theta, c.scaling.factor, c.scaling.low_freq_factor,
                                     c.scaling.high_freq_factor, c.scaling.original_max_positions)
                               : ref::Vec{}));
}

const RopeCase kEdgeCases[] = {
    {1, 1, 1, 2},            // smallest: one pair
    {2, 7, 3, 8},            // odd T and H
    {1, 5, 2, 6, 17, 5e5f},  // offset, Llama-3 theta, D/2 odd
    {2, 0, 2, 4},            // T == 0
    // Llama 3.1's scaling with a short original context: D = 32 puts pairs in all three bands.
    {1, 9, 2, 32, 40, 5e5f, RopeScaling{.factor = 8, .original_max_positions = 64}},
    {1, 3, 2, 1026},  // a row longer than the CPU kernel's chunk: its halves in two parts each
};

TEST_P(OpConformance, rope_fwd_shapes) {
  H2_REQUIRE_OP(Op::rope_fwd);
  for (const RopeCase& c : kEdgeCases) check_rope(*this, Op::rope_fwd, c);
  check_rope(*this, Op::rope_fwd, {2, 5, 3, 8, 3}, true);
}

TEST_P(OpConformance, rope_bwd_shapes) {
  H2_REQUIRE_OP(Op::rope_bwd);
  for (const RopeCase& c : kEdgeCases) check_rope(*this, Op::rope_bwd, c);
  check_rope(*this, Op::rope_bwd, {2, 5, 3, 8, 3}, true);
}

TEST_P(OpConformance, rope_fwd_model) {
  H2_REQUIRE_OP(Op::rope_fwd);
  check_rope(*this, Op::rope_fwd, {2, 64, 4, 64});
  check_rope(*this, Op::rope_fwd, {2, 64, 2, 64});  // the k heads (Hkv = 2)
}

TEST_P(OpConformance, rope_bwd_model) {
  H2_REQUIRE_OP(Op::rope_bwd);
  check_rope(*this, Op::rope_bwd, {2, 64, 4, 64});
}

TEST_P(OpConformance, rope_fwd_out_aliases_x) {
  H2_REQUIRE_OP(Op::rope_fwd);
  H2_REQUIRE_OP(Op::rope_bwd);
  RopeCase c{2, 9, 3, 16, 4};
  for (Op op : {Op::rope_fwd, Op::rope_bwd}) {
    auto x = rand(c.B * c.T * c.H * c.D);
    Tensor tx = upload(x, {c.B, c.T, c.H, c.D});
    run_rope(op, tx, tx, c);
    expect_close(fmt::format("{} in place {}", op_name(op), describe(c)), tx,
                 ref::rope(to_double(x), c.B, c.T, c.H, c.D, c.theta, c.offset,
                           op == Op::rope_fwd ? 1 : -1));
  }
}

// In place on the q and k heads of a fused qkv tensor: the first H + Hkv heads of a (B, T, H + 2
// Hkv, D) tensor turn, and the v heads stay as they were.
TEST_P(OpConformance, rope_in_place_on_qk_heads_of_fused_qkv) {
  H2_REQUIRE_OP(Op::rope_fwd);
  H2_REQUIRE_OP(Op::rope_bwd);
  const RopeCase c{2, 5, 3, 8, 2};  // c.H = H + Hkv = 2 + 1; one more v head
  const int64_t W = c.H + 1;
  for (Op op : {Op::rope_fwd, Op::rope_bwd}) {
    auto qkv = rand(c.B * c.T * W * c.D);
    Tensor base = upload(qkv, {c.B, c.T, W, c.D});
    Tensor qk = base.slice(2, 0, c.H);
    run_rope(op, qk, qk, c);
    std::vector<float> x, v;
    for (int64_t bt = 0; bt < c.B * c.T; ++bt) {
      auto row = qkv.begin() + bt * W * c.D;
      x.insert(x.end(), row, row + c.H * c.D);
      v.insert(v.end(), row + c.H * c.D, row + W * c.D);
    }
    const std::string tag = fmt::format("{} fused qk heads {}", op_name(op), describe(c));
    expect_close(tag, qk,
                 ref::rope(to_double(x), c.B, c.T, c.H, c.D, c.theta, c.offset,
                           op == Op::rope_fwd ? 1 : -1));
    expect_close(tag + " v heads", base.slice(2, c.H, W), to_double(v));
  }
}

// Decoding positions [7, 20) with position_offset 7 equals rotating the whole sequence and slicing.
TEST_P(OpConformance, rope_fwd_offset_equals_longer_slice) {
  H2_REQUIRE_OP(Op::rope_fwd);
  const int64_t B = 2, T = 20, H = 3, D = 8, start = 7;
  auto x = rand(B * T * H * D);
  Tensor long_out = nans({B, T, H, D}, dt());
  run_rope(Op::rope_fwd, long_out, upload(x, {B, T, H, D}), {B, T, H, D});
  std::vector<float> tail;
  for (int64_t b = 0; b < B; ++b)
    tail.insert(tail.end(), x.begin() + (b * T + start) * H * D, x.begin() + (b + 1) * T * H * D);
  Tensor short_out = nans({B, T - start, H, D}, dt());
  run_rope(Op::rope_fwd, short_out, upload(tail, {B, T - start, H, D}),
           {B, T - start, H, D, start});
  std::vector<float> sliced = tensor_to_floats(long_out.slice(1, start, T));
  expect_close("offset output vs slice of the longer sequence", short_out, to_double(sliced));
}

// The CPU keeps each table it makes (per device, rope_tables.h): calls of one shape that differ in
// one thing each (offset, theta, Llama 3 scaling and its factors) must each get their own, also
// when a kept one is asked again.
TEST_P(OpConformance, rope_tables_differ_in_every_parameter) {
  H2_REQUIRE_OP(Op::rope_fwd);
  H2_REQUIRE_OP(Op::rope_bwd);
  const RopeScaling llama3{.factor = 8, .original_max_positions = 64};
  RopeScaling other_band = llama3;
  other_band.high_freq_factor = 2;
  RopeScaling other_factor = llama3;
  other_factor.factor = 4;
  const RopeCase plain{1, 12, 2, 32};
  for (const RopeCase& c :
       {plain, RopeCase{1, 12, 2, 32, 9}, RopeCase{1, 12, 2, 32, 0, 5e5f},
        RopeCase{1, 12, 2, 32, 40, 1e4f, llama3}, RopeCase{1, 12, 2, 32, 40, 1e4f, other_band},
        RopeCase{1, 12, 2, 32, 40, 1e4f, other_factor}, plain})
    for (Op op : {Op::rope_fwd, Op::rope_bwd}) check_rope(*this, op, c);
}

TEST_P(OpConformance, rope_bwd_inverts_fwd) {
  H2_REQUIRE_OP(Op::rope_fwd);
  H2_REQUIRE_OP(Op::rope_bwd);
  for (RopeCase c : {RopeCase{2, 11, 3, 8, 5}, RopeCase{2, 64, 4, 64}}) {
    auto x = rand(c.B * c.T * c.H * c.D);
    Shape shape{c.B, c.T, c.H, c.D};
    Tensor y = nans(shape, dt()), back = nans(shape, dt());
    run_rope(Op::rope_fwd, y, upload(x, shape), c);
    run_rope(Op::rope_bwd, back, y, c);
    expect_close(fmt::format("rope_bwd(rope_fwd(x)) vs x {}", describe(c)), back, to_double(x));
  }
}

}  // namespace
}  // namespace h2::test
