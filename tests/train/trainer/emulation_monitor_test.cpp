// The progress line's overrun warning (train/emulation_monitor.h): silent while every rank keeps
// within 2% of its modelled time; otherwise the worst rank with its kernels' and links' shares,
// and the knob that paces what overran (links: the cluster's time_scale alone). The worst rank is
// also the metrics' emulation_overrun.
#include "train/emulation_monitor.h"

#include <gtest/gtest.h>

namespace h2::train {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OverrunWarning, SilentWithinTheLimitOrWithoutEmulation) {
  EXPECT_EQ(overrun_warning({}), "");
  EXPECT_EQ(overrun_warning({.kernels = {0.01, 0.02}, .links = {0, 0}, .total = {0.01, 0.02}}),
            "");  // exactly 2% is within
}

TEST(OverrunWarning, NamesTheWorstRankAndTheLinksKnob) {
  // The README demo's pattern: kernels keep up, chip-a's links overran their (short) modelled
  // time by far more, a few percent of the rank's whole modelled time.
  const std::string w = overrun_warning({.kernels = {0.001, 0.0011, 0.0014, 0.0014},
                                         .links = {1.7206, 2.5037, 0, 0},
                                         .total = {0.0201, 0.0274, 0.0014, 0.0014}});
  EXPECT_TRUE(has(w, "overrun 2.7% > 2% at rank 1")) << w;
  EXPECT_TRUE(has(w, "kernels 0.1%, links 250.4% of their modelled time")) << w;
  EXPECT_TRUE(has(w, "raise the cluster's time_scale (H2_VCHIP_TIME_SCALE paces chips, not links)"))
      << w;
}

TEST(OverrunWarning, KernelsAloneMayTakeEitherKnob) {
  const std::string w =
      overrun_warning({.kernels = {0.05}, .links = {0}, .total = {0.05}});  // one chip, no links
  EXPECT_TRUE(has(w, "overrun 5.0% > 2% at rank 0 (kernels 5.0%, links 0.0%")) << w;
  EXPECT_TRUE(has(w, "the cluster's time_scale or H2_VCHIP_TIME_SCALE")) << w;
}

TEST(OverrunShares, WorstRankIsTheLargestTotalTheFirstOfEquals) {
  const EmulationMonitor::Shares shares = {
      .kernels = {0, 0, 0, 0}, .links = {0, 0, 0, 0}, .total = {0.01, 0.03, 0.03, 0.02}};
  EXPECT_EQ(shares.worst_rank(), 1u);
  EXPECT_EQ(EmulationMonitor::Shares{.total = {0.5}}.worst_rank(), 0u);
}

}  // namespace
}  // namespace h2::train
