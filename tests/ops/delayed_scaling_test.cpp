// Delayed scaling: no history before the first record, the multiplier from the max of the
// history, the oldest entry dropping out after H records, the margin, degenerate amaxes, the
// history round trip, and its use as the imposed multiplier of a per-tensor quantize.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/lowp/delayed_scaling.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::DelayedScaling;
using lowp::Format;

TEST(DelayedScaling, FirstStepHasNoHistory) {
  DelayedScaling ds(Format::e4m3);
  EXPECT_FALSE(ds.has_history());
  EXPECT_EQ(ds.history_len(), 1024);
  EXPECT_THROW(ds.multiplier(), Error);
  ds.record(2);
  EXPECT_TRUE(ds.has_history());
  EXPECT_EQ(ds.multiplier(), 448.0f / 2.0f);
}

TEST(DelayedScaling, MultiplierFromTheMaxOfTheHistory) {
  DelayedScaling ds(Format::e5m2, 4);
  for (float amax : {1.0f, 8.0f, 2.0f}) ds.record(amax);
  EXPECT_EQ(ds.history_amax(), 8.0f);
  EXPECT_EQ(ds.multiplier(), 57344.0f / 8.0f);
  EXPECT_EQ(ds.history(), (std::vector<float>{2, 8, 1}));  // newest first
}

TEST(DelayedScaling, OldestEntryDropsOutAfterHRecords) {
  DelayedScaling ds(Format::e4m3, 3);
  for (float amax : {16.0f, 1.0f, 2.0f}) ds.record(amax);
  EXPECT_EQ(ds.history_amax(), 16.0f);
  ds.record(4);  // 16 rotates out
  EXPECT_EQ(ds.history(), (std::vector<float>{4, 2, 1}));
  EXPECT_EQ(ds.history_amax(), 4.0f);
  EXPECT_EQ(ds.multiplier(), 112.0f);
  ds.record(0.5f);
  ds.record(0.5f);  // 2 and 1 gone; 4 still held
  EXPECT_EQ(ds.history_amax(), 4.0f);
  ds.record(0.5f);
  EXPECT_EQ(ds.history_amax(), 0.5f);
  EXPECT_EQ(ds.steps_recorded(), 7);
}

TEST(DelayedScaling, MarginAddsPowerOfTwoHeadroom) {
  DelayedScaling ds(Format::e4m3, 8, 2);
  ds.record(7);
  EXPECT_EQ(ds.multiplier(), 448.0f / (7.0f * 4.0f));
  DelayedScaling negative(Format::e2m1, 8, -1);
  negative.record(3);
  EXPECT_EQ(negative.multiplier(), 6.0f / 1.5f);
}

TEST(DelayedScaling, DegenerateHistoriesGiveOne) {
  DelayedScaling zeros(Format::e4m3, 2);
  zeros.record(0);
  EXPECT_EQ(zeros.multiplier(), 1.0f);
  DelayedScaling inf(Format::e4m3, 2);
  inf.record(std::numeric_limits<float>::infinity());
  EXPECT_EQ(inf.multiplier(), 1.0f);
  DelayedScaling nan(Format::e4m3, 2);
  nan.record(3);
  nan.record(std::nanf(""));
  EXPECT_EQ(nan.multiplier(), 1.0f);
  EXPECT_THROW(DelayedScaling(Format::e4m3, 0), Error);
}

TEST(DelayedScaling, HistoryRoundTrip) {
  DelayedScaling ds(Format::e4m3, 3);
  for (float amax : {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}) ds.record(amax);
  DelayedScaling restored(Format::e4m3, 3);
  restored.set_history(ds.history(), ds.steps_recorded());
  EXPECT_EQ(restored.history(), ds.history());
  ds.record(0.25f);
  restored.record(0.25f);
  EXPECT_EQ(restored.history(), ds.history());
  EXPECT_EQ(restored.multiplier(), ds.multiplier());
}

// The loop a trainer runs: quantize with the delayed multiplier (current scaling on step 0) and
// record the step's amax from the stats.
TEST(DelayedScaling, DrivesPerTensorQuantize) {
  Device& cpu = lowp_runtime().cpu();
  const lowp::QuantSpec spec{.element = Format::e4m3, .rule = lowp::ScaleRule::f32_amax};
  DelayedScaling ds(Format::e4m3, 16);
  Tensor stats = Tensor::empty({2}, DType::f32, cpu);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x{1, -2, float(step + 3)};
    Tensor in = tensor_from_floats(x, {1, 3}, DType::f32, cpu);
    lowp::QTensor q = lowp::QTensor::empty(spec, 1, 3, cpu);
    const float m = ds.has_history() ? ds.multiplier() : 0;  // 0: current scaling
    ops::quantize({.q = q, .stats = stats, .in = in, .multiplier = m});
    const float scale = tensor_to_floats(q.scales)[0];
    EXPECT_EQ(scale, step == 0 ? 1.0f / (448.0f / 3.0f) : 1.0f / (448.0f / float(step + 2)));
    const std::vector<float> s = tensor_to_floats(stats);
    EXPECT_EQ(s[0], float(step + 3));
    EXPECT_EQ(s[1], step == 0 ? 0.0f : 1.0f);  // the new amax exceeds the old range by one
    ds.record(s[0]);
  }
}

}  // namespace
}  // namespace h2::test
