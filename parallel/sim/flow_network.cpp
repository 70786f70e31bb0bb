// Max-min fair flows over links, re-shared per connected component (see flow_network.h).
#include "parallel/sim/flow_network.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace h2::parallel::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Finish times within this relative distance of an event's time end at that event: flows that
// finish together in exact arithmetic may differ by rounding.
constexpr double kSameTime = 1e-12;

}  // namespace

FlowNetwork::FlowNetwork(std::vector<double> link_bandwidth)
    : bandwidth_(std::move(link_bandwidth)),
      on_link_(bandwidth_.size()),
      link_mark_(bandwidth_.size(), 0),
      link_left_(bandwidth_.size(), 0),
      link_unfrozen_(bandwidth_.size(), 0) {
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
  const FlowId id = FlowId(flows_.size());
  flows_.push_back({.links = std::move(links), .remaining = bytes, .updated = now_});
  ++active_;
  Flow& f = flows_.back();
  if (f.links.empty()) {  // nothing limits it: done at once
    f.rate = kInf;
    finishes_.push({now_, id, f.version});
    return id;
  }
  for (int l : f.links) on_link_[size_t(l)].push_back(id);
  reshare(f.links);
  return id;
}

void FlowNetwork::reshare(const std::vector<int>& seed) {
  // The component: links and flows reachable from `seed` through flows sharing links.
  ++mark_;
  std::vector<int> links;
  std::vector<FlowId> flows;
  for (int l : seed)
    if (link_mark_[size_t(l)] != mark_) link_mark_[size_t(l)] = mark_, links.push_back(l);
  for (size_t i = 0; i < links.size(); ++i)
    for (FlowId id : on_link_[size_t(links[i])]) {
      Flow& f = flows_[size_t(id)];
      if (f.version % 2 == 1) continue;  // odd version: already collected this round
      ++f.version;
      flows.push_back(id);
      for (int l : f.links)
        if (link_mark_[size_t(l)] != mark_) link_mark_[size_t(l)] = mark_, links.push_back(l);
    }
  // Bring the component's bytes up to now; progressive filling over its links.
  for (FlowId id : flows) {
    Flow& f = flows_[size_t(id)];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now_ - f.updated));
    f.updated = now_;
    f.rate = 0;
  }
  for (int l : links) {
    link_left_[size_t(l)] = bandwidth_[size_t(l)];
    link_unfrozen_[size_t(l)] = int(on_link_[size_t(l)].size());
  }
  std::vector<FlowId> unfrozen = flows;
  while (!unfrozen.empty()) {
    double step = kInf;
    for (int l : links)
      if (link_unfrozen_[size_t(l)] > 0)
        step = std::min(step, link_left_[size_t(l)] / link_unfrozen_[size_t(l)]);
    if (step == kInf) {  // only infinite links left: those flows are unlimited
      for (FlowId id : unfrozen) flows_[size_t(id)].rate = kInf;
      break;
    }
    for (int l : links) link_left_[size_t(l)] -= step * link_unfrozen_[size_t(l)];
    auto saturated = [&](int l) {  // ends at zero up to rounding; an infinite link never does
      return std::isfinite(bandwidth_[size_t(l)]) &&
             link_left_[size_t(l)] <= 1e-12 * bandwidth_[size_t(l)];
    };
    std::vector<FlowId> still;
    for (FlowId id : unfrozen) {
      Flow& f = flows_[size_t(id)];
      f.rate += step;
      if (std::none_of(f.links.begin(), f.links.end(), saturated)) {
        still.push_back(id);
        continue;
      }
      for (int l : f.links) --link_unfrozen_[size_t(l)];
    }
    unfrozen.swap(still);
  }
  for (FlowId id : flows) {
    Flow& f = flows_[size_t(id)];
    ++f.version;  // even again: entries pushed before are stale
    finishes_.push({f.rate == kInf ? now_ : now_ + f.remaining / f.rate, id, f.version});
  }
}

void FlowNetwork::drop_stale() const {
  while (!finishes_.empty()) {
    const Finish& top = finishes_.top();
    const Flow& f = flows_[size_t(top.id)];
    if (f.active && f.version == top.version) return;
    finishes_.pop();
  }
}

double FlowNetwork::next_finish() const {
  drop_stale();
  return finishes_.empty() ? kInf : finishes_.top().time;
}

std::vector<FlowId> FlowNetwork::advance(double t) {
  H2_CHECK(t >= now_, "advance to {} s from {} s: time runs forward", t, now_);
  const double limit = next_finish();
  H2_CHECK(t <= limit + kSameTime * std::max(1.0, std::abs(limit)),
           "advance to {} s past the next finish at {} s (rates change there)", t, limit);
  now_ = t;
  std::vector<FlowId> done;
  std::vector<int> freed;  // links of the finished flows: their components re-share
  const double horizon = t + kSameTime * std::max(1.0, std::abs(t));
  for (drop_stale(); !finishes_.empty() && finishes_.top().time <= horizon; drop_stale()) {
    const FlowId id = finishes_.top().id;
    finishes_.pop();
    Flow& f = flows_[size_t(id)];
    f.active = false;
    f.rate = 0;
    f.remaining = 0;
    --active_;
    done.push_back(id);
    for (int l : f.links) {
      std::vector<FlowId>& on = on_link_[size_t(l)];
      on.erase(std::find(on.begin(), on.end(), id));
      freed.push_back(l);
    }
  }
  if (!freed.empty()) reshare(freed);
  std::sort(done.begin(), done.end());  // ids are in start order
  return done;
}

double FlowNetwork::rate(FlowId id) const {
  if (id < 0 || id >= FlowId(flows_.size()) || !flows_[size_t(id)].active) return 0;
  return flows_[size_t(id)].rate;
}

}  // namespace h2::parallel::sim
