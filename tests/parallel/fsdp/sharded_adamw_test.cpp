// ShardedAdamW in forked ranks (groups of 1, 2 and 3): three steps on two units (a decoder block
// and a parameter set whose N is divisible by no group size above 1) with every rank
// contributing distinct gradients equal the unsharded optim::AdamW applied to the summed
// gradients, with global-norm clipping engaged, in f32 and bf16 compute: gathered masters and
// the rebuilt compute copies within 1e-6 relative, the global gradient norm within 1e-6, padding
// of masters, moments and gradients zero throughout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/tensor_host.h"
#include "fsdp_fixtures.h"
#include "multiproc.h"
#include "parallel/fsdp/sharded_adamw.h"

namespace h2::parallel::fsdp {
namespace {

using comm::testing::RankContext;
using comm::testing::run_ranks;
using testing::make_param_set;
using testing::ParamSet;

constexpr double kLr = 1e-2;
constexpr double kMaxNorm = 1.0;  // below every step's norm: clipping always engages
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-9;  // elements that happen to be within rounding of zero
const char* const kSets[] = {"block", "odd"};

// The masters of `g` gathered over its group: N elements; checks that padding is zero.
std::vector<float> gathered_masters(FlatParamGroup& g, const std::string& what) {
  Tensor full = Tensor::empty({g.padded_numel()}, DType::f32, g.device());
  g.group().all_gather(full, g.master_shard());
  std::vector<float> all = tensor_to_floats(full);
  for (int64_t i = g.numel(); i < g.padded_numel(); ++i)
    H2_CHECK(all[size_t(i)] == 0.0f, "{}: padding element {} of the masters is {}", what, i,
             all[size_t(i)]);
  all.resize(size_t(g.numel()));
  return all;
}

// This rank's shard elements at flat positions >= N (padding) must be zero in `t`.
void expect_zero_padding(const FlatParamGroup& g, const Tensor& t, const std::string& what) {
  const std::vector<float> v = tensor_to_floats(t);
  for (int64_t j = 0; j < g.shard_numel(); ++j)
    if (g.shard_offset() + j >= g.numel())
      H2_CHECK(v[size_t(j)] == 0.0f, "{}: padding element {} is {}", what, j, v[size_t(j)]);
}

void compare_with_unsharded(RankContext& ctx, DType dtype) {
  const int n = ctx.size(), r = ctx.rank();
  const std::string what = fmt::format("{} n={}", dtype_name(dtype), n);
  const optim::AdamwOptions options{.weight_decay = 0.1};

  // Reference: the whole model in one process, gradients already summed over ranks.
  std::vector<ParamSet> ref_sets;
  std::vector<optim::ParamRef> refs;
  for (const char* name : kSets) {
    ref_sets.push_back(make_param_set(name, dtype, ctx.device));
    for (models::Param* p : ref_sets.back().pointers())
      refs.push_back({p->name, p->value, p->grad});
  }
  optim::AdamW reference(refs, options);

  std::vector<ParamSet> sets;
  std::vector<std::unique_ptr<FlatParamGroup>> groups;
  std::vector<FlatParamGroup*> units;
  for (const char* name : kSets) {
    sets.push_back(make_param_set(name, dtype, ctx.device));
    groups.push_back(std::make_unique<FlatParamGroup>(ctx.comm(), sets.back().pointers()));
    units.push_back(groups.back().get());
  }
  ShardedAdamW sharded(units, options);

  for (int step = 0; step < 3; ++step) {
    const std::string at = fmt::format("{} step {}", what, step + 1);
    // Each rank's own gradients (salted per unit so units differ), reduced into the shards.
    for (size_t u = 0; u < units.size(); ++u) {
      units[u]->unshard();
      testing::write_grads(sets[u].pointers(), r, step, int64_t(u) * 1000, false);
      units[u]->reshard();
      units[u]->reduce_grad();
      expect_zero_padding(*units[u], units[u]->grad_shard(), at + " grad shard");
    }
    size_t k = 0;
    for (size_t u = 0; u < ref_sets.size(); ++u) {
      const std::vector<float> sum =
          testing::summed_grads(ref_sets[u].numel(), n, step, int64_t(u) * 1000);
      int64_t offset = 0;
      for (models::Param* p : ref_sets[u].pointers()) {
        const std::span<const float> part(sum.data() + offset, size_t(p->grad.numel()));
        refs[k++].grad.copy_from(tensor_from_floats(part, p->grad.shape(), DType::f32, ctx.device));
        offset += p->grad.numel();
      }
    }

    const double norm = sharded.grad_norm(), want_norm = reference.grad_norm();
    H2_CHECK(std::fabs(norm - want_norm) <= kRtol * want_norm,
             "{}: global gradient norm {} but the unsharded norm is {}", at, norm, want_norm);
    H2_CHECK(norm > kMaxNorm, "{}: norm {} does not engage clipping", at, norm);
    sharded.step(kLr, optim::clip_scale(norm, kMaxNorm));
    reference.step(kLr, optim::clip_scale(want_norm, kMaxNorm));
    sharded.zero_grad();
    reference.zero_grad();

    k = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      std::vector<float> want;
      for (size_t i = 0; i < units[u]->layout().size(); ++i) {
        std::vector<float> m = tensor_to_floats(reference.state()[k++].master);
        want.insert(want.end(), m.begin(), m.end());
      }
      testing::expect_close(gathered_masters(*units[u], at), want, kRtol, kAtol,
                            at + " masters of " + units[u]->label());
      expect_zero_padding(*units[u], sharded.state()[u].m, at + " m");
      expect_zero_padding(*units[u], sharded.state()[u].v, at + " v");
    }
  }
  // The compute copies rebuilt from the shards match the unsharded optimizer's.
  std::vector<float> want;
  for (const optim::ParamRef& ref : refs) {
    std::vector<float> v = tensor_to_floats(ref.param);
    want.insert(want.end(), v.begin(), v.end());
  }
  std::vector<float> got;
  for (size_t u = 0; u < units.size(); ++u) {
    units[u]->unshard();
    std::vector<float> v = testing::flat_values(sets[u].pointers());
    got.insert(got.end(), v.begin(), v.end());
  }
  // bf16 copies of masters that differ in the last FP32 bits may round one bf16 step apart.
  const double rtol = dtype == DType::f32 ? kRtol : 1.0 / 128;
  testing::expect_close(got, want, rtol, kAtol, what + " compute copies");

  // Stepping with a unit still unsharded is refused, naming the unit.
  bool refused = false;
  try {
    sharded.step(kLr);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("reshard() it before step()") != std::string::npos;
  }
  H2_CHECK(refused, "{}: step() ran on unsharded units", what);
}

class ShardedAdamWGroups : public ::testing::TestWithParam<int> {};

TEST_P(ShardedAdamWGroups, ThreeStepsEqualUnshardedAdamWOnSummedGradients) {
  const auto outcomes = run_ranks(GetParam(), [](RankContext& ctx) {
    for (DType dtype : {DType::f32, DType::bf16}) compare_with_unsharded(ctx, dtype);
  });
  comm::testing::expect_all_ok(outcomes);
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, ShardedAdamWGroups, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return fmt::format("n{}", info.param); });

TEST(ShardedAdamW, EqualsUnshardedAdamWOnVirtualChips) {
  comm::testing::RunOptions options;
  options.device = [](int rank) { return fmt::format("vchip:{}", rank); };
  options.env = {{"H2_VCHIP_TIME_SCALE", "0"}};
  const auto outcomes = run_ranks(
      2, [](RankContext& ctx) { compare_with_unsharded(ctx, DType::bf16); }, options);
  comm::testing::expect_all_ok(outcomes);
}

}  // namespace
}  // namespace h2::parallel::fsdp
