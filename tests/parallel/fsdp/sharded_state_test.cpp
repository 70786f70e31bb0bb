// The FSDP ModelState's checkpoint view in forked ranks on virtual chips (groups of 2 and 3): after
// one AdamW step on summed gradients, pieces() gives the group's rank 0 every parameter's whole
// master and moments, in host memory, equal to AdamW's first step computed in double precision
// (m = (1-b1) g, v = (1-b2) g^2, p' = p - lr (wd p + g / (|g| + eps))); the other ranks write
// nothing. Gathering them raises the device's peak by at most one unit's padded FP32 vector (the
// state stays sharded on the chip: a checkpoint needs no more device memory than the step held).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/size_class.h"
#include "core/tensor_host.h"
#include "fsdp_fixtures.h"
#include "multiproc.h"
#include "parallel/runtime/model_state.h"

namespace h2::parallel {
namespace {

using comm::testing::RankContext;
using comm::testing::run_ranks;
using fsdp::testing::make_param_set;
using fsdp::testing::ParamSet;

constexpr double kLr = 1e-2;
const char* const kSets[] = {"block", "odd"};

// AdamW's first step from zero moments on gradient g, for one element.
struct FirstStep {
  double master, m, v;
};
FirstStep first_step(double p, double g, double wd, const optim::AdamwOptions& o) {
  const double m = (1 - o.beta1) * g, v = (1 - o.beta2) * g * g;
  const double m_hat = m / (1 - o.beta1), v_hat = v / (1 - o.beta2);
  return {p - kLr * (wd * p + m_hat / (std::sqrt(v_hat) + o.eps)), m, v};
}

void check_pieces(RankContext& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  const optim::AdamwOptions options{};
  std::vector<ParamSet> sets;
  std::vector<std::vector<float>> initial;
  std::vector<std::unique_ptr<fsdp::FlatParamGroup>> groups;
  std::vector<fsdp::FlatParamGroup*> units;
  for (const char* name : kSets) {
    sets.push_back(make_param_set(name, DType::f32, ctx.device));
    initial.push_back(fsdp::testing::flat_values(sets.back().pointers()));
    groups.push_back(std::make_unique<fsdp::FlatParamGroup>(ctx.comm(), sets.back().pointers()));
    units.push_back(groups.back().get());
  }
  auto state = ModelState::sharded(units, options,
                                   {.job = &ctx.comm(),
                                    .host = &ctx.runtime.cpu(),
                                    .counts = [](const std::string&) { return true; }});
  for (size_t u = 0; u < units.size(); ++u) {  // each rank's gradients, summed into the shards
    units[u]->unshard();
    fsdp::testing::write_grads(sets[u].pointers(), r, 0, int64_t(u) * 1000, false);
    units[u]->reshard();
    units[u]->reduce_grad();
  }
  state->step(kLr, 1.0);

  Allocator& chip = ctx.device.allocator();
  const int64_t before = chip.stats().bytes_in_use;
  chip.reset_peak();
  const std::vector<StatePiece> pieces = state->pieces();
  const int64_t rise = chip.stats().peak_bytes_in_use - before;
  int64_t largest = 0, whole = 0;
  for (const fsdp::FlatParamGroup* f : units) {
    largest = std::max(largest, f->padded_numel());
    whole += 3 * 4 * f->padded_numel();
  }
  const int64_t bound = int64_t(allocation_size_class(size_t(4 * largest), 64));
  H2_CHECK(rise <= bound && bound < whole,
           "rank {}: gathering the checkpoint raised the chip's peak by {} bytes; one unit's "
           "padded FP32 vector is {} (every whole tensor at once: {})",
           r, rise, bound, whole);

  const bool writer = r == 0;
  size_t k = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const std::vector<float> g =
        fsdp::testing::summed_grads(units[u]->numel(), n, 0, int64_t(u) * 1000);
    int64_t offset = 0;
    for (const fsdp::FlatSlot& slot : units[u]->layout()) {
      const StatePiece& piece = pieces.at(k++);
      H2_CHECK(piece.name == slot.name, "piece {} is '{}', want '{}'", k - 1, piece.name,
               slot.name);
      H2_CHECK(piece.master.shape() == slot.shape, "{}: piece of shape {}", slot.name,
               piece.master.shape().str());
      H2_CHECK(piece.shares == (writer ? 1 : 0), "rank {} writes {} shares of {}", r, piece.shares,
               slot.name);
      if (!writer) {
        offset += slot.numel;
        continue;
      }
      H2_CHECK(&piece.master.device() == &ctx.runtime.cpu(),
               "{}: the gathered master is on {}, not in host memory", slot.name,
               piece.master.device().str());
      const double wd = slot.shape.rank() >= 2 ? options.weight_decay : 0.0;
      const std::vector<float> master = tensor_to_floats(piece.master),
                               m = tensor_to_floats(piece.m), v = tensor_to_floats(piece.v);
      for (int64_t i = 0; i < slot.numel; ++i) {
        const FirstStep want =
            first_step(initial[u][size_t(offset + i)], g[size_t(offset + i)], wd, options);
        auto close = [&](double got, double expected, const char* what) {
          H2_CHECK(std::fabs(got - expected) <= 1e-6 * std::fabs(expected) + 1e-9,
                   "{}[{}] {}: {} but AdamW's first step gives {}", slot.name, i, what, got,
                   expected);
        };
        close(master[size_t(i)], want.master, "master");
        close(m[size_t(i)], want.m, "m");
        close(v[size_t(i)], want.v, "v");
      }
      offset += slot.numel;
    }
  }
  H2_CHECK(k == pieces.size(), "{} pieces for {} parameters", pieces.size(), k);
}

class ShardedStateGroups : public ::testing::TestWithParam<int> {};

TEST_P(ShardedStateGroups, CheckpointPiecesAreWholeInHostMemoryAndGatheredOneUnitAtATime) {
  comm::testing::RunOptions options;
  options.device = [](int rank) { return fmt::format("vchip:{}", rank); };
  options.env = {{"H2_VCHIP_TIME_SCALE", "0"}};
  comm::testing::expect_all_ok(run_ranks(GetParam(), check_pieces, options));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, ShardedStateGroups, ::testing::Values(2, 3),
                         [](const auto& info) { return fmt::format("n{}", info.param); });

}  // namespace
}  // namespace h2::parallel
