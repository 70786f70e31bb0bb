// Why a runner-up lost to the best plan, in words (see search.h, explain()).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "parallel/planner/search.h"

namespace h2::parallel::planner {

std::string explain(const Candidate& best, const Candidate& other, const CostInputs& in) {
  const PlanEstimate& a = best.estimate;
  const PlanEstimate& b = other.estimate;
  std::vector<std::pair<double, std::string>> reasons;  // (seconds lost, why)
  reasons.emplace_back(
      b.pipeline_s * b.bubble - a.pipeline_s * a.bubble,
      fmt::format("more pipeline bubble ({:.1f}% vs {:.1f}%)", 100 * b.bubble, 100 * a.bubble));
  reasons.emplace_back(b.comm_s - a.comm_s,
                       fmt::format("more communication on its busiest rank ({:.1f} vs {:.1f} ms)",
                                   1e3 * b.comm_s, 1e3 * a.comm_s));
  reasons.emplace_back(b.tail_s - a.tail_s,
                       fmt::format("a longer optimizer and replica-reduction tail ({:.1f} vs "
                                   "{:.1f} ms)",
                                   1e3 * b.tail_s, 1e3 * a.tail_s));
  double busiest_a = 0, busiest_b = 0;
  std::string slow_chip;
  for (const auto& p : a.positions) busiest_a = std::max(busiest_a, p.busy_s);
  for (const auto& p : b.positions)
    if (p.busy_s > busiest_b) busiest_b = p.busy_s, slow_chip = p.chip;
  reasons.emplace_back(busiest_b - busiest_a,
                       fmt::format("a slower bottleneck ({} busy {:.1f} vs {:.1f} ms per step)",
                                   slow_chip, 1e3 * busiest_b, 1e3 * busiest_a));
  if (other.plan.recompute && !best.plan.recompute)
    reasons.emplace_back(1e9, "it needs recomputation to fit its chips' memory");
  if (other.plan.world_size() < best.plan.world_size())
    reasons.emplace_back(1e8, fmt::format("it leaves {} chips idle",
                                          best.plan.world_size() - other.plan.world_size()));
  std::sort(reasons.begin(), reasons.end(), std::greater<>());
  std::string out = fmt::format("{:+.1f}% step time: ", 100 * (b.step_s / a.step_s - 1));
  int said = 0;
  for (const auto& [lost, why] : reasons) {
    if (lost <= 0 || said == 2) break;
    out += (said++ ? "; " : "") + why;
  }
  if (said == 0) out += "no single cause (small differences everywhere)";
  (void)in;
  return out;
}

}  // namespace h2::parallel::planner
