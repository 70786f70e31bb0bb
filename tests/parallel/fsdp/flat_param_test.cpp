// FlatParamGroup in forked ranks (groups of 1, 2 and 3):
// - sharding then unsharding rebuilds every parameter bit for bit, in f32 and bf16, with N
//   divisible by the group size or not (and smaller than it), three times in a row: with
//   unshard(), with begin_unshard() + finish_unshard() (the prefetch: values stay undefined until
//   the finish) and with begin_unshard() + unshard(); a reshard() during a gather in flight
//   finishes it first; resharded values are undefined and a layer using one fails;
// - reduce_grad leaves scale * (sum over ranks of each rank's distinct gradients) in the shard,
//   padding zero, accumulates across micro-batches and reshards, and frees the full gradients;
//   begun and finished in two halves it leaves the same bits (in an order-sensitive case);
// - both on the CPU and on virtual chips (device memory);
// - ranks that built different units are told so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/tensor_host.h"
#include "fsdp_fixtures.h"
#include "multiproc.h"
#include "parallel/fsdp/flat_param.h"

namespace h2::parallel::fsdp {
namespace {

using comm::testing::describe;
using comm::testing::expect_all_ok;
using comm::testing::RankContext;
using comm::testing::run_ranks;
using testing::make_param_set;
using testing::ParamSet;

// Checks the sizes and this rank's master shard against the original flat values.
void check_shard(const FlatParamGroup& g, const std::vector<float>& original, int n, int rank,
                 const std::string& what) {
  const int64_t N = int64_t(original.size());
  H2_CHECK(g.numel() == N && g.padded_numel() % n == 0 && g.padding() >= 0 && g.padding() < n,
           "{}: N {} padded to {} for a group of {}", what, g.numel(), g.padded_numel(), n);
  H2_CHECK(g.shard_numel() * n == g.padded_numel() && g.shard_offset() == rank * g.shard_numel(),
           "{}: shard {} at {}", what, g.shard_numel(), g.shard_offset());
  std::vector<float> want(size_t(g.shard_numel()), 0.0f);
  for (int64_t j = 0; j < g.shard_numel(); ++j)
    if (g.shard_offset() + j < N) want[size_t(j)] = original[size_t(g.shard_offset() + j)];
  testing::expect_bits(tensor_to_floats(g.master_shard()), want, what + " master shard");
}

void round_trip(RankContext& ctx, const std::string& set_name, DType dtype) {
  const std::string what = fmt::format("{} {} n={}", set_name, dtype_name(dtype), ctx.size());
  ParamSet set = make_param_set(set_name, dtype, ctx.device);
  const std::vector<models::Param*> params = set.pointers();
  const std::vector<float> original = testing::flat_values(params);

  FlatParamGroup g(ctx.comm(), params);
  for (const models::Param* p : params)
    H2_CHECK(!p->value.defined() && !p->grad.defined(), "{}: '{}' not released", what, p->name);
  check_shard(g, original, ctx.size(), ctx.rank(), what);

  for (int cycle = 0; cycle < 3; ++cycle) {
    if (cycle == 0) {
      g.unshard();
    } else {
      g.begin_unshard(/*tag=*/cycle);
      g.begin_unshard(/*tag=*/cycle);  // already in flight: nothing happens
      H2_CHECK(g.unshard_in_flight() && !g.is_unsharded(), "{}: no gather in flight", what);
      for (const models::Param* p : params)
        H2_CHECK(!p->value.defined(), "{}: '{}' usable before the gather finished", what, p->name);
      g.poll_unshard();
      if (cycle == 1)
        g.finish_unshard();
      else
        g.unshard();  // finishes the gather in flight
      H2_CHECK(!g.unshard_in_flight(), "{}: gather still in flight", what);
    }
    g.unshard();  // already unsharded: nothing happens
    H2_CHECK(g.is_unsharded() && g.has_full_grads(), "{}: not unsharded", what);
    for (size_t i = 0; i < params.size(); ++i) {
      const models::Param& p = *params[i];
      H2_CHECK(p.value.dtype() == dtype && p.value.shape() == g.layout()[i].shape,
               "{}: '{}' rebuilt as {}", what, p.name, p.value.str());
      H2_CHECK(p.grad.dtype() == DType::f32 && p.grad.shape() == p.value.shape(),
               "{}: grad of '{}' is {}", what, p.name, p.grad.str());
      const std::vector<float> grad = tensor_to_floats(p.grad);
      H2_CHECK(std::all_of(grad.begin(), grad.end(), [](float x) { return x == 0.0f; }),
               "{}: grad of '{}' is not zero", what, p.name);
    }
    testing::expect_bits(testing::flat_values(params), original, what + " unsharded values");
    g.reshard();
    H2_CHECK(!g.is_unsharded(), "{}: still unsharded", what);
    for (const models::Param* p : params)
      H2_CHECK(!p->value.defined(), "{}: '{}' still has a value", what, p->name);
  }
  // A reshard with a gather in flight lets the transfers finish before it frees the buffers.
  g.begin_unshard(/*tag=*/9);
  g.reshard();
  H2_CHECK(!g.unshard_in_flight() && !g.is_unsharded(), "{}: gather left in flight", what);
  for (const models::Param* p : params)
    H2_CHECK(!p->value.defined(), "{}: '{}' has a value after reshard", what, p->name);
  // A layer touching a resharded weight fails instead of reading freed memory.
  for (size_t i = 0; i < params.size(); ++i) {
    const Shape& shape = g.layout()[i].shape;
    if (shape.rank() != 2) continue;
    Tensor x = Tensor::zeros({1, shape[1]}, dtype, ctx.device);
    Tensor out = Tensor::empty({1, shape[0]}, dtype, ctx.device);
    bool failed = false;
    try {
      models::linear_fwd(out, x, *params[i]);
    } catch (const Error&) {
      failed = true;
    }
    H2_CHECK(failed, "{}: a linear layer ran on the resharded '{}'", what, params[i]->name);
    break;
  }
}

void reduce_grads(RankContext& ctx, const std::string& set_name, DType dtype) {
  const std::string what = fmt::format("{} {} n={}", set_name, dtype_name(dtype), ctx.size());
  const int n = ctx.size(), r = ctx.rank();
  ParamSet set = make_param_set(set_name, dtype, ctx.device);
  const std::vector<models::Param*> params = set.pointers();
  FlatParamGroup g(ctx.comm(), params);
  const int64_t N = g.numel();

  // Two micro-batches accumulate into the full gradients, across a reshard/unshard cycle.
  g.unshard();
  testing::write_grads(params, r, 0, 0, false);
  g.reshard();
  g.unshard();
  testing::write_grads(params, r, 1, 0, true);
  g.reshard();
  g.reduce_grad(0.5);
  H2_CHECK(!g.has_full_grads(), "{}: full gradients kept after reduce_grad", what);
  for (const models::Param* p : params)
    H2_CHECK(!p->grad.defined(), "{}: grad of '{}' kept after reduce_grad", what, p->name);

  const std::vector<float> s0 = testing::summed_grads(N, n, 0, 0);
  const std::vector<float> s1 = testing::summed_grads(N, n, 1, 0);
  const std::vector<float> s2 = testing::summed_grads(N, n, 2, 0);
  std::vector<float> want(size_t(g.shard_numel()), 0.0f);
  for (int64_t j = 0; j < g.shard_numel(); ++j) {
    const int64_t i = g.shard_offset() + j;
    if (i < N) want[size_t(j)] = 0.5f * (s0[size_t(i)] + s1[size_t(i)]);
  }
  testing::expect_bits(tensor_to_floats(g.grad_shard()), want, what + " reduced shard");

  // The next reduction adds into the shard when asked to.
  g.unshard();
  testing::write_grads(params, r, 2, 0, false);
  g.reduce_grad(1.0, true);
  for (int64_t j = 0; j < g.shard_numel(); ++j) {
    const int64_t i = g.shard_offset() + j;
    if (i < N) want[size_t(j)] += s2[size_t(i)];
  }
  testing::expect_bits(tensor_to_floats(g.grad_shard()), want, what + " accumulated shard");
  g.reshard();

  // Without full gradients there is nothing to reduce: a clear error, no collective.
  bool failed = false;
  try {
    g.reduce_grad();
  } catch (const Error& e) {
    failed = std::string(e.what()).find("without full gradients") != std::string::npos;
  }
  H2_CHECK(failed, "{}: reduce_grad without gradients did not fail clearly", what);
  g.zero_grad_shard();
  testing::expect_bits(tensor_to_floats(g.grad_shard()),
                       std::vector<float>(size_t(g.shard_numel()), 0.0f), what + " zeroed");
}

// Gradients whose sums round differently in different orders: +-(1 + m / 3) * 2^-e mixes
// magnitudes, so that only the same order of additions gives the same bits.
float inexact_grad(int64_t k, int rank) {
  const double mantissa = 1.0 + double((k + rank) % 7) / 3.0;
  const double value = std::ldexp(mantissa, -int((k * 5 + rank * 11) % 23));
  return float((k + rank) % 2 == 1 ? -value : value);
}

void write_inexact_grads(const std::vector<models::Param*>& params, int rank) {
  int64_t offset = 0;
  for (models::Param* p : params) {
    std::vector<float> host(size_t(p->grad.numel()));
    for (size_t i = 0; i < host.size(); ++i) host[i] = inexact_grad(offset + int64_t(i), rank);
    p->grad.copy_from(tensor_from_floats(host, p->grad.shape(), DType::f32, p->grad.device()));
    offset += p->grad.numel();
  }
}

// The reduction in two halves (posted behind the backward, finished at REDUCE_GRAD) leaves the
// blocking reduce_grad()'s shard bit for bit, with gradients whose sum depends on the order (3
// ranks: two additions), and within rounding of a double-precision sum; the finish scales,
// accumulates and frees like reduce_grad(), and reduce_grad() finishes a reduction in flight.
void overlapped_reduce(RankContext& ctx, const std::string& set_name) {
  const std::string what = fmt::format("{} n={}", set_name, ctx.size());
  const int n = ctx.size(), r = ctx.rank();
  ParamSet set = make_param_set(set_name, DType::f32, ctx.device);
  const std::vector<models::Param*> params = set.pointers();
  FlatParamGroup g(ctx.comm(), params);

  g.unshard();
  write_inexact_grads(params, r);
  g.reduce_grad(0.5);
  const std::vector<float> blocking = tensor_to_floats(g.grad_shard());

  g.unshard();
  write_inexact_grads(params, r);
  g.begin_reduce_grad(/*tag=*/5);
  g.begin_reduce_grad(/*tag=*/5);  // already in flight: nothing happens
  H2_CHECK(g.reduce_in_flight() && g.has_full_grads(), "{}: no reduction in flight", what);
  g.reshard();  // the full gradients outlive a reshard while the reduction moves
  g.poll_reduce_grad();
  g.finish_reduce_grad(0.5);
  H2_CHECK(!g.reduce_in_flight() && !g.has_full_grads(), "{}: reduction left behind", what);
  for (const models::Param* p : params)
    H2_CHECK(!p->grad.defined(), "{}: grad of '{}' kept after the finish", what, p->name);
  const std::vector<float> overlapped = tensor_to_floats(g.grad_shard());
  testing::expect_bits(overlapped, blocking, what + " overlapped against blocking reduction");

  // Independent reference: the same gradients summed in double.
  for (int64_t j = 0; j < g.shard_numel(); ++j) {
    const int64_t i = g.shard_offset() + j;
    double want = 0, magnitude = 0;  // float addition errs by at most 2^-24 of |partial sums|
    if (i < g.numel())
      for (int q = 0; q < n; ++q) {
        want += 0.5 * double(inexact_grad(i, q));
        magnitude += 0.5 * std::abs(double(inexact_grad(i, q)));
      }
    H2_CHECK(std::abs(double(overlapped[size_t(j)]) - want) <= 1.5e-7 * magnitude,
             "{}: element {} is {} where the double sum is {}", what, i, overlapped[size_t(j)],
             want);
  }

  // reduce_grad() with accumulation finishes a reduction in flight and adds to the shard.
  g.zero_grad_shard();
  g.unshard();
  write_inexact_grads(params, r);
  g.begin_reduce_grad(/*tag=*/6);
  g.reduce_grad(0.5, /*accumulate=*/true);
  testing::expect_bits(tensor_to_floats(g.grad_shard()), blocking, what + " accumulated finish");
}

class FlatParamGroups : public ::testing::TestWithParam<int> {};

TEST_P(FlatParamGroups, ShardUnshardRoundTripIsBitExact) {
  expect_all_ok(run_ranks(GetParam(), [](RankContext& ctx) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (const std::string& set : testing::param_set_names()) round_trip(ctx, set, dtype);
  }));
}

TEST_P(FlatParamGroups, ReduceGradSumsEveryRanksGradients) {
  expect_all_ok(run_ranks(GetParam(), [](RankContext& ctx) {
    for (DType dtype : {DType::f32, DType::bf16})
      for (const std::string& set : testing::param_set_names()) reduce_grads(ctx, set, dtype);
  }));
}

TEST_P(FlatParamGroups, OverlappedReductionEqualsTheBlockingOneBitForBit) {
  expect_all_ok(run_ranks(GetParam(), [](RankContext& ctx) {
    for (const std::string& set : testing::param_set_names()) overlapped_reduce(ctx, set);
  }));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, FlatParamGroups, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return fmt::format("n{}", info.param); });

// Device memory (virtual chips): the communicator stages shards through the host.
TEST(FlatParamGroup, RoundTripAndReduceOnVirtualChips) {
  comm::testing::RunOptions options;
  options.device = [](int rank) { return fmt::format("vchip:{}", rank); };
  options.env = {{"H2_VCHIP_TIME_SCALE", "0"}};
  expect_all_ok(run_ranks(
      2,
      [](RankContext& ctx) {
        for (DType dtype : {DType::f32, DType::bf16})
          for (const std::string& set : testing::param_set_names()) {
            round_trip(ctx, set, dtype);
            reduce_grads(ctx, set, dtype);
          }
      },
      options));
}

TEST(FlatParamGroup, RanksWithDifferentUnitsAreTold) {
  const auto outcomes = run_ranks(2, [](RankContext& ctx) {
    ParamSet set = make_param_set(ctx.rank() == 0 ? "divisible" : "odd", DType::f32, ctx.device);
    FlatParamGroup g(ctx.comm(), set.pointers());
  });
  for (const auto& o : outcomes) {
    ASSERT_NE(o.exit_code, 0) << describe(outcomes);
    EXPECT_NE(o.message.find("every rank of the group must build the same unit"), std::string::npos)
        << o.message;
  }
}

}  // namespace
}  // namespace h2::parallel::fsdp
