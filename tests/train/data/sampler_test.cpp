// The training window sampler (deterministic per seed, targets shifted by one, windows inside the
// split, resumable with seek, uniform over start offsets) and the evaluation windows (each
// validation target scored exactly once, in a fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "train/data/dataset.h"
#include "train/data/sampler.h"

namespace h2::data {
namespace {

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 0);
  return tokens;
}

// Pseudo-text: token i is a hash of i, so a window's content identifies its start only loosely.
std::vector<int32_t> hashed_tokens(int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = int32_t((uint64_t(i) * 2654435761u) % 251);
  return tokens;
}

TEST(WindowSampler, SameSeedSameBatchesDifferentSeedDifferent) {
  std::vector<int32_t> tokens = hashed_tokens(5000);
  WindowSampler a(tokens, 4, 16, 1234), b(tokens, 4, 16, 1234), c(tokens, 4, 16, 1235);
  int differing = 0;
  for (int k = 0; k < 20; ++k) {
    Batch ba = a.next(), bb = b.next(), bc = c.next();
    EXPECT_EQ(ba.inputs, bb.inputs) << k;
    EXPECT_EQ(ba.targets, bb.targets) << k;
    differing += ba.inputs != bc.inputs;
  }
  EXPECT_EQ(differing, 20);
  EXPECT_EQ(a.position(), 20u);
}

TEST(WindowSampler, PinnedStartsAreThePlatformIndependentStream) {
  // The stream is defined by integer arithmetic only; these values must never change, or resumed
  // runs and published results stop matching.
  EXPECT_EQ(counter_uniform(0, 0, 1000), counter_uniform(0, 0, 1000));
  const uint64_t pinned[4] = {counter_uniform(42, 0, 1000000), counter_uniform(42, 1, 1000000),
                              counter_uniform(42, 2, 1000000), counter_uniform(7, 0, 1000000)};
  EXPECT_EQ(pinned[0], 596118u);
  EXPECT_EQ(pinned[1], 160365u);
  EXPECT_EQ(pinned[2], 166397u);
  EXPECT_EQ(pinned[3], 524345u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(counter_uniform(9, i, 1), 0u);
  // Ranges near 2^64 take the rejection path; results stay in range.
  const uint64_t huge = (uint64_t(1) << 63) + 12345;
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_LT(counter_uniform(3, i, huge), huge);
}

TEST(WindowSampler, TargetsAreInputsShiftedByOne) {
  std::vector<int32_t> tokens = hashed_tokens(3000);
  WindowSampler s(tokens, 3, 32, 7);
  for (uint64_t k = 0; k < 10; ++k) {
    Batch b = s.next();
    for (int64_t r = 0; r < 3; ++r) {
      const int64_t start = s.window_start(k, r);
      for (int64_t t = 0; t < 32; ++t) {
        ASSERT_EQ(b.inputs[size_t(r * 32 + t)], tokens[size_t(start + t)]);
        ASSERT_EQ(b.targets[size_t(r * 32 + t)], tokens[size_t(start + t + 1)]);
        if (t + 1 < 32) {
          ASSERT_EQ(b.targets[size_t(r * 32 + t)], b.inputs[size_t(r * 32 + t + 1)]);
        }
      }
    }
  }
}

TEST(WindowSampler, WindowsStayInsideTheTrainingSplit) {
  TokenDataset data(iota_tokens(1000), "iota");
  DataSplit split = data.split(0.2, 16);  // train = tokens 0..799
  WindowSampler s(split.train, 8, 16, 99);
  EXPECT_EQ(s.num_windows(), 800 - 16);
  for (int k = 0; k < 500; ++k) {
    Batch b = s.next();
    for (int32_t t : b.inputs) ASSERT_LT(t, 799);
    for (int32_t t : b.targets) ASSERT_LT(t, 800);  // the last target may be token 799, never 800
    for (int32_t t : b.targets) ASSERT_GE(t, 1);
  }
}

TEST(WindowSampler, SeekResumesTheUninterruptedStream) {
  std::vector<int32_t> tokens = hashed_tokens(4000);
  WindowSampler whole(tokens, 4, 8, 555);
  std::vector<Batch> expected;
  for (int k = 0; k < 12; ++k) expected.push_back(whole.next());

  WindowSampler first(tokens, 4, 8, 555);
  for (int k = 0; k < 5; ++k) first.next();
  const uint64_t saved = first.position();  // what a checkpoint stores
  EXPECT_EQ(saved, 5u);

  WindowSampler resumed(tokens, 4, 8, 555);  // a new process
  resumed.seek(saved);
  for (int k = 5; k < 12; ++k) {
    Batch b = resumed.next();
    EXPECT_EQ(b.inputs, expected[size_t(k)].inputs) << k;
    EXPECT_EQ(b.targets, expected[size_t(k)].targets) << k;
  }
  resumed.seek(2);  // seeking backwards replays too
  EXPECT_EQ(resumed.next().inputs, expected[2].inputs);
}

TEST(WindowSampler, StartsAreUniformOverTheRange) {
  // 1000 possible starts, 200,000 draws: expected 200 per start. The chi-square statistic has 999
  // degrees of freedom (mean 999, sd sqrt(2 * 999) = 44.7); a uniform stream lands within 6 sd
  // ([731, 1267]) except with probability ~1e-9, while an off-by-one (a start never drawn) adds
  // about 200 and a modulo-style skew of even 10% on a third of the starts adds over 60 * 3.
  // Both ends of the range must be hit.
  const int64_t seq_len = 4, windows = 1000, batch = 50, batches = 4000;
  std::vector<int32_t> tokens = iota_tokens(windows + seq_len);
  WindowSampler s(tokens, batch, seq_len, 2024);
  ASSERT_EQ(s.num_windows(), windows);
  std::vector<int64_t> counts(static_cast<size_t>(windows));
  std::vector<int32_t> in(size_t(batch * seq_len)), tg(size_t(batch * seq_len));
  for (int64_t k = 0; k < batches; ++k) {
    s.next(in, tg);
    for (int64_t r = 0; r < batch; ++r) ++counts[size_t(in[size_t(r * seq_len)])];
  }
  const double expected = double(batch * batches) / double(windows);
  double chi2 = 0;
  for (int64_t c : counts) chi2 += (double(c) - expected) * (double(c) - expected) / expected;
  EXPECT_GT(chi2, 731.0);
  EXPECT_LT(chi2, 1267.0);
  EXPECT_GT(counts.front(), 0);
  EXPECT_GT(counts.back(), 0);
}

TEST(WindowSampler, RejectsImpossibleShapes) {
  std::vector<int32_t> tokens = iota_tokens(10);
  EXPECT_THROW(WindowSampler(tokens, 0, 4, 1), ConfigError);
  EXPECT_THROW(WindowSampler(tokens, 2, 0, 1), ConfigError);
  EXPECT_THROW(WindowSampler(tokens, 2, 10, 1), ConfigError);  // needs 11 tokens
  WindowSampler one(tokens, 2, 9, 1);                          // exactly one window
  Batch b = one.next();
  EXPECT_EQ(b.inputs.front(), 0);
  EXPECT_EQ(b.targets.back(), 9);
  std::vector<int32_t> small(5);
  EXPECT_THROW(one.next(small, small), Error);
}

TEST(EvalWindows, CoverTheValidationSplitExactlyOnce) {
  TokenDataset data(iota_tokens(1000), "iota");
  DataSplit split = data.split(0.3, 16);  // val = tokens 700..999 (300 tokens)
  EvalWindows eval(split.val, 4, 16);
  EXPECT_EQ(eval.num_windows(), 299 / 16);  // 18 windows score targets 701..988
  EXPECT_EQ(eval.num_batches(), 5);         // 4 + 4 + 4 + 4 + 2

  std::vector<int32_t> in(64), tg(64), seen_targets, seen_inputs;
  std::vector<int64_t> rows_per_batch;
  for (int pass = 0; pass < 2; ++pass) {
    seen_targets.clear();
    seen_inputs.clear();
    rows_per_batch.clear();
    while (int64_t rows = eval.next(in, tg)) {
      rows_per_batch.push_back(rows);
      seen_inputs.insert(seen_inputs.end(), in.begin(), in.begin() + rows * 16);
      seen_targets.insert(seen_targets.end(), tg.begin(), tg.begin() + rows * 16);
    }
    EXPECT_EQ(eval.next(in, tg), 0);  // stays exhausted
    eval.reset();
  }
  EXPECT_EQ(rows_per_batch, (std::vector<int64_t>{4, 4, 4, 4, 2}));
  // Fixed order, no overlap, no gap: targets are exactly 701..988 once each, inputs 700..987.
  std::vector<int32_t> want(18 * 16);
  std::iota(want.begin(), want.end(), 701);
  EXPECT_EQ(seen_targets, want);
  std::iota(want.begin(), want.end(), 700);
  EXPECT_EQ(seen_inputs, want);
  // As many windows as fit: the targets left unscored (split.val has size - 1 targets) are fewer
  // than one window's.
  const int64_t unscored = int64_t(split.val.size()) - 1 - int64_t(seen_targets.size());
  EXPECT_GE(unscored, 0);
  EXPECT_LT(unscored, 16);
}

TEST(EvalWindows, ExactFitAndErrors) {
  std::vector<int32_t> tokens = iota_tokens(33);  // 32 targets = 4 windows of 8 exactly
  EvalWindows eval(tokens, 3, 8);
  EXPECT_EQ(eval.num_windows(), 4);
  std::vector<int32_t> in(24), tg(24);
  EXPECT_EQ(eval.next(in, tg), 3);
  EXPECT_EQ(eval.next(in, tg), 1);
  EXPECT_EQ(tg[7], 32);  // the last token is scored
  EXPECT_THROW(EvalWindows(tokens, 1, 33), ConfigError);
  EXPECT_THROW(EvalWindows(tokens, 0, 8), ConfigError);
}

}  // namespace
}  // namespace h2::data
