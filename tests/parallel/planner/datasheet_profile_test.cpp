// Data-sheet profiles (parallel/planner/datasheet_profile.h) against the formulas worked out by
// hand for the planner tests' small Llama (T x C = 8 x 16, K = 16, F = 32, V = 64; a block holds
// 2,592 parameters, the embedding 1,024, the head 1,040) on a chip of 1 GFLOP/s and 100 MB/s, f32:
//   at r = 2 rows, N = 16 tokens: block forward GEMM 2 N (2 C^2 + 2 C K + 3 C F) = 81,920 FLOP,
//   attention 2 N T C = 4,096 FLOP, bytes 2,592 x 4 + N (12 C + 4 F) x 4 = 30,848;
//   efficiencies: GEMM 0.5 x N / (N + 8) = 1/3, attention 0.25 x T / (T + 8) = 1/8, memory 1;
// so forward = 81,920 / (1e9 / 3) + 4,096 / (1e9 / 8) + 30,848 / 1e8 s, and with no curve
// (half points 0) the GEMM runs at the plateau, 0.5. Time scales multiply every figure.
#include "parallel/planner/datasheet_profile.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/parallel/planner/planner_test_model.h"

namespace h2::parallel::planner {
namespace {

ChipSpec chip() {
  return {.name = "paper",
          .memory_bytes = int64_t(1) << 30,
          .memory_bandwidth = 1e8,
          .peak_flops = {{DType::f32, 1e9}},
          .time_scale = 2};
}

TEST(DatasheetProfile, BlockForwardIsTheRooflineOnItsEfficiencyCurves) {
  const ModelShape m = test::model(3);
  ASSERT_EQ(m.block_parameters(), 2592);
  const Efficiency curve{.gemm = 0.5,
                         .attention = 0.25,
                         .memory = 1.0,
                         .gemm_half_tokens = 8,
                         .attention_half_tokens = 8};
  const ChipProfile p = datasheet_profile(chip(), 1.5, m, DType::f32, {2, 4}, curve);
  const double scale = 2 * 1.5;
  const double gemm = 81920, attention = 4096, bytes = 30848;
  const double want = gemm / (1e9 / 3) + attention / (1e9 / 8) + bytes / 1e8;
  EXPECT_NEAR(p.by_rows.at(2)[size_t(UnitKind::block)].forward_s, scale * want, 1e-15);
  // At 4 rows (N = 32): twice the GEMM FLOPs at 0.5 x 32 / 40 = 0.4, twice the attention FLOPs
  // at the same 1/8, the weights once and twice the activations' bytes.
  const double want4 = 2 * gemm / 0.4e9 + 2 * attention / (1e9 / 8) +
                       (2592 * 4 + 2 * 16 * (12 * 16 + 4 * 32) * 4) / 1e8;
  EXPECT_NEAR(p.by_rows.at(4)[size_t(UnitKind::block)].forward_s, scale * want4, 1e-15);

  // Without curves (half points 0) every operation runs at its plateau.
  Efficiency flat = curve;
  flat.gemm_half_tokens = flat.attention_half_tokens = 0;
  const ChipProfile q = datasheet_profile(chip(), 1.5, m, DType::f32, {2}, flat);
  const double plateau = gemm / 0.5e9 + attention / 0.25e9 + bytes / 1e8;
  EXPECT_NEAR(q.by_rows.at(2)[size_t(UnitKind::block)].forward_s, scale * plateau, 1e-15);
  // The weight gradient: the GEMM again and the FP32 gradient written.
  EXPECT_NEAR(q.by_rows.at(2)[size_t(UnitKind::block)].weight_s,
              scale * (gemm / 0.5e9 + 2592 * 4 / 1e8), 1e-15);
  EXPECT_NE(p.key.origin.find("N / (N + 8)"), std::string::npos) << p.key.origin;
  // The efficiencies are in the key: profiles of other efficiencies, or measured, are others.
  EXPECT_EQ(p.key.origin, datasheet_origin(curve));
  EXPECT_EQ(p.key.difference(profile_key(chip(), 1.5, m, DType::f32, datasheet_origin(curve))), "");
  EXPECT_NE(p.key.origin, q.key.origin);
  EXPECT_NE(profile_file_name(p.key), profile_file_name(q.key));
  EXPECT_NE(profile_file_name(p.key), profile_file_name(profile_key(chip(), 1.5, m, DType::f32)));
}

TEST(DatasheetProfile, AChipWithoutAPeakForTheDtypeIsNamed) {
  try {
    datasheet_profile(chip(), 1, test::model(3), DType::bf16, {2});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'paper'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace h2::parallel::planner
