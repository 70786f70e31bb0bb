// Max-min fair flows over links (see flow_network.h).
#include "parallel/sim/flow_network.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace h2::parallel::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A flow with at most this many bytes left is done (as is one whose rest would take under a
// picosecond per second of simulated time): rounding in remaining -= rate * dt must not leave a
// flow a femtobyte short of finishing.
constexpr double kDoneBytes = 1e-9;

}  // namespace

FlowNetwork::FlowNetwork(std::vector<double> link_bandwidth)
    : bandwidth_(std::move(link_bandwidth)) {
  for (size_t i = 0; i < bandwidth_.size(); ++i)
    H2_CHECK(bandwidth_[i] > 0, "link {} has bandwidth {} (must be positive)", i, bandwidth_[i]);
}

FlowId FlowNetwork::start(std::vector<int> links, double bytes) {
  H2_CHECK(bytes >= 0 && std::isfinite(bytes), "a flow of {} bytes", bytes);
  std::vector<int> sorted = links;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    H2_CHECK(sorted[i] >= 0 && sorted[i] < int(bandwidth_.size()),
             "flow over link {}: the network has {} links", sorted[i], bandwidth_.size());
    H2_CHECK(i == 0 || sorted[i] != sorted[i - 1], "flow crosses link {} twice", sorted[i]);
  }
  active_.push_back({next_id_, std::move(links), bytes});
  share();
  return next_id_++;
}

void FlowNetwork::share() {
  // Progressive filling: every unfrozen flow's rate rises by the same amount until some link
  // runs out; the flows on that link freeze. Each round freezes at least one flow.
  std::vector<double> left = bandwidth_;  // capacity not yet given out
  std::vector<int> unfrozen_on(bandwidth_.size(), 0);
  std::vector<bool> frozen(active_.size(), false);
  size_t frozen_count = 0;
  for (size_t f = 0; f < active_.size(); ++f) {
    active_[f].rate = 0;
    if (active_[f].links.empty()) {  // nothing limits it: done at once (next_finish is now)
      active_[f].rate = kInf;
      frozen[f] = true;
      ++frozen_count;
      continue;
    }
    for (int l : active_[f].links) ++unfrozen_on[size_t(l)];
  }
  while (frozen_count < active_.size()) {
    double step = kInf;
    for (size_t l = 0; l < left.size(); ++l)
      if (unfrozen_on[l] > 0) step = std::min(step, left[l] / unfrozen_on[l]);
    if (step == kInf) {  // only infinite links left: those flows are unlimited
      for (size_t f = 0; f < active_.size(); ++f)
        if (!frozen[f]) active_[f].rate = kInf, frozen[f] = true, ++frozen_count;
      break;
    }
    std::vector<bool> saturated(left.size(), false);
    for (size_t l = 0; l < left.size(); ++l) {
      if (unfrozen_on[l] == 0) continue;
      left[l] -= step * unfrozen_on[l];
      // Relative test: the link whose share set `step` ends at zero up to rounding (a link of
      // infinite bandwidth never does).
      saturated[l] = std::isfinite(bandwidth_[l]) && left[l] <= 1e-12 * bandwidth_[l];
    }
    for (size_t f = 0; f < active_.size(); ++f) {
      if (frozen[f]) continue;
      active_[f].rate += step;
      const bool stuck = std::any_of(active_[f].links.begin(), active_[f].links.end(),
                                     [&](int l) { return saturated[size_t(l)]; });
      if (!stuck) continue;
      frozen[f] = true;
      ++frozen_count;
      for (int l : active_[f].links) --unfrozen_on[size_t(l)];
    }
  }
}

double FlowNetwork::next_finish() const {
  double t = kInf;
  for (const Flow& f : active_)
    t = std::min(t, f.rate == kInf || f.remaining <= 0 ? now_ : now_ + f.remaining / f.rate);
  return t;
}

std::vector<FlowId> FlowNetwork::advance(double t) {
  H2_CHECK(t >= now_, "advance to {} s from {} s: time runs forward", t, now_);
  const double limit = next_finish();
  H2_CHECK(t <= limit * (1 + 1e-12) + 1e-15,
           "advance to {} s past the next finish at {} s (rates change there)", t, limit);
  const double dt = t - now_;
  now_ = t;
  std::vector<FlowId> done;
  for (Flow& f : active_) {
    f.remaining = f.rate == kInf ? 0 : f.remaining - f.rate * dt;
    // Done when what is left would take no measurable time at its rate.
    if (f.remaining <= kDoneBytes || f.remaining <= f.rate * 1e-12 * std::max(1.0, now_))
      done.push_back(f.id);
  }
  if (!done.empty()) {
    std::erase_if(active_, [&](const Flow& f) {
      return std::find(done.begin(), done.end(), f.id) != done.end();
    });
    share();
  }
  return done;
}

double FlowNetwork::rate(FlowId id) const {
  for (const Flow& f : active_)
    if (f.id == id) return f.rate;
  return 0;
}

}  // namespace h2::parallel::sim
