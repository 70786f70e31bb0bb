// FlowNetwork against analytic cases and the definition of max-min fairness:
// - one flow takes bytes / bandwidth; n flows starting together on one link take n times that;
// - a flow joining later slows the first one down only while both run (times worked out below);
// - flows with different bottlenecks get the max-min rates (a flow limited elsewhere leaves its
//   share to the others);
// - on random networks, every rate allocation is feasible (no link over its bandwidth) and every
//   flow has a bottleneck: a saturated link on its path where no flow gets more than it (the
//   definition, checked independently of how the rates were computed, after every event, with
//   flows joining at later events); and moving the bytes event by event conserves them (each
//   flow's bytes equal the integral of its rate);
// - bad input is refused with the value named.
#include "parallel/sim/flow_network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "core/error.h"

namespace h2::parallel::sim {
namespace {

// Runs the network until every flow finished; returns each flow's finish time.
std::map<FlowId, double> finish_all(FlowNetwork& net) {
  std::map<FlowId, double> finished;
  while (net.active() > 0)
    for (FlowId id : net.advance(net.next_finish())) finished[id] = net.now();
  return finished;
}

TEST(FlowNetwork, OneFlowTakesBytesOverBandwidth) {
  FlowNetwork net({2e9});
  const FlowId f = net.start({0}, 3e9);
  EXPECT_DOUBLE_EQ(net.rate(f), 2e9);
  EXPECT_DOUBLE_EQ(finish_all(net).at(f), 1.5);
}

TEST(FlowNetwork, FlowsStartingTogetherShareALinkEqually) {
  FlowNetwork net({1e9});
  std::vector<FlowId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(net.start({0}, 1e9));
  for (FlowId id : ids) EXPECT_DOUBLE_EQ(net.rate(id), 0.25e9);
  const auto finished = finish_all(net);
  for (FlowId id : ids) EXPECT_NEAR(finished.at(id), 4.0, 1e-12);
}

// A: 1 GB from t = 0 on a 1 GB/s link; B: 0.25 GB from t = 0.5. By 0.5 A moved 0.5 GB; both then
// run at 0.5 GB/s, so B ends at 0.5 + 0.25 / 0.5 = 1.0 with A at 0.75 GB; A's last 0.25 GB at
// full speed ends at 1.25.
TEST(FlowNetwork, ALateFlowSlowsTheFirstOnlyWhileBothRun) {
  FlowNetwork net({1e9});
  const FlowId a = net.start({0}, 1e9);
  EXPECT_TRUE(net.advance(0.5).empty());
  const FlowId b = net.start({0}, 0.25e9);
  EXPECT_DOUBLE_EQ(net.rate(a), 0.5e9);
  const auto finished = finish_all(net);
  EXPECT_NEAR(finished.at(b), 1.0, 1e-12);
  EXPECT_NEAR(finished.at(a), 1.25, 1e-12);
}

// Links: 0 (1 GB/s) and 1 (3 GB/s). X crosses both, Y and Z only link 1. All three rise to
// 1 GB/s, where both links are full. With link 1 at 4 GB/s, link 0 still stops X at 1 GB/s and Y
// and Z take 1.5 each: the capacity X cannot use goes to the others.
TEST(FlowNetwork, AFlowLimitedElsewhereLeavesItsShareToTheOthers) {
  for (double second : {3e9, 4e9}) {
    FlowNetwork net({1e9, second});
    const FlowId x = net.start({0, 1}, 1e9);
    const FlowId y = net.start({1}, 1e9);
    const FlowId z = net.start({1}, 1e9);
    EXPECT_DOUBLE_EQ(net.rate(x), 1e9) << second;
    EXPECT_DOUBLE_EQ(net.rate(y), (second - 1e9) / 2) << second;
    EXPECT_DOUBLE_EQ(net.rate(z), (second - 1e9) / 2) << second;
  }
}

TEST(FlowNetwork, InfiniteLinksAndEmptyPathsDoNotLimit) {
  const double inf = std::numeric_limits<double>::infinity();
  FlowNetwork net({inf, 1e9});
  const FlowId free = net.start({0}, 5e9);
  const FlowId empty = net.start({}, 1e9);
  const FlowId limited = net.start({0, 1}, 1e9);
  EXPECT_EQ(net.rate(free), inf);
  EXPECT_DOUBLE_EQ(net.rate(limited), 1e9);
  const auto done = net.advance(net.next_finish());  // at once
  EXPECT_EQ(net.now(), 0.0);
  EXPECT_EQ(done, (std::vector<FlowId>{free, empty}));
  EXPECT_NEAR(finish_all(net).at(limited), 1.0, 1e-12);
}

// The definition of max-min fairness, checked on the rates alone.
void expect_max_min_fair(const FlowNetwork& net, const std::vector<double>& bandwidth,
                         const std::map<FlowId, std::vector<int>>& paths, const std::string& what) {
  std::vector<double> load(bandwidth.size(), 0);
  std::vector<double> top(bandwidth.size(), 0);  // the largest rate on each link
  for (const auto& [id, links] : paths)
    for (int l : links) {
      load[size_t(l)] += net.rate(id);
      top[size_t(l)] = std::max(top[size_t(l)], net.rate(id));
    }
  for (size_t l = 0; l < bandwidth.size(); ++l)
    ASSERT_LE(load[l], bandwidth[l] * (1 + 1e-9)) << what << ": link " << l << " over capacity";
  for (const auto& [id, links] : paths) {
    bool bottleneck = false;
    for (int l : links)
      bottleneck |= load[size_t(l)] >= bandwidth[size_t(l)] * (1 - 1e-9) &&
                    net.rate(id) >= top[size_t(l)] * (1 - 1e-9);
    ASSERT_TRUE(bottleneck) << what << ": flow " << id << " at " << net.rate(id)
                            << " B/s has no saturated link where it is among the fastest";
  }
}

TEST(FlowNetwork, RandomNetworksAreMaxMinFairAndConserveBytes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int links = 1 + int(rng() % 6);
    std::vector<double> bandwidth;
    for (int l = 0; l < links; ++l) bandwidth.push_back(1e8 * double(1 + rng() % 20));
    FlowNetwork net(bandwidth);
    std::map<FlowId, std::vector<int>> paths;
    std::map<FlowId, double> bytes, moved;
    auto start_one = [&] {
      std::vector<int> path;
      for (int l = 0; l < links; ++l)
        if (rng() % 3 == 0) path.push_back(l);
      if (path.empty()) path.push_back(int(rng() % links));
      const double b = 1e6 * double(1 + rng() % 1000);
      const FlowId id = net.start(path, b);
      paths[id] = path;
      bytes[id] = b;
    };
    const int flows = 1 + int(rng() % 8);
    for (int k = 0; k < flows; ++k) start_one();
    int late = int(rng() % 8);  // flows that start at later events, joining running ones
    const std::string what = "trial " + std::to_string(trial);
    while (net.active() > 0) {
      if (late > 0 && rng() % 2 == 0) {
        start_one();
        --late;
      }
      std::map<FlowId, std::vector<int>> running;
      for (const auto& [id, path] : paths)
        if (net.rate(id) > 0) running[id] = path;
      expect_max_min_fair(net, bandwidth, running, what);
      const double from = net.now(), to = net.next_finish();
      for (const auto& [id, path] : running) moved[id] += net.rate(id) * (to - from);
      for (FlowId id : net.advance(to)) paths.erase(id);
    }
    for (const auto& [id, b] : bytes) EXPECT_NEAR(moved[id], b, 1e-6 * b) << what << " flow " << id;
  }
}

TEST(FlowNetwork, BadInputIsNamed) {
  auto message = [](auto&& body) {
    try {
      body();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([] {
              FlowNetwork({1e9, 0});
            }).find("link 1 has bandwidth 0"),
            std::string::npos);
  FlowNetwork net({1e9});
  EXPECT_NE(message([&] { net.start({3}, 1); }).find("link 3: the network has 1 links"),
            std::string::npos);
  EXPECT_NE(message([&] { net.start({0, 0}, 1); }).find("crosses link 0 twice"), std::string::npos);
  EXPECT_NE(message([&] { net.start({0}, -5); }).find("-5 bytes"), std::string::npos);
  net.start({0}, 1e9);
  EXPECT_NE(message([&] { net.advance(2.0); }).find("past the next finish"), std::string::npos);
}

}  // namespace
}  // namespace h2::parallel::sim
