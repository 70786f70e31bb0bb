// Topology on a cluster of two chip types, two nodes each: one transfer alone takes exactly
// Cluster::link's time between every pair of chips (intra-node, inter-node, cross-type with the
// slower chip's bandwidth, time_scale applied); transfers leaving one chip over one link class
// share its port, over different classes they do not; a class the cluster leaves out is named.
#include "parallel/sim/topology.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "sim_fixtures.h"

namespace h2::parallel::sim {
namespace {

using testing::two_types;

// Seconds until one transfer of `bytes` from a to b arrives, started alone at time 0.
double alone(const Topology& topo, int a, int b, double bytes) {
  FlowNetwork net = topo.network();
  net.start(topo.path(a, b), bytes);
  net.advance(net.next_finish());
  return topo.latency(a, b) + net.now();
}

TEST(Topology, OneTransferTakesTheClustersLinkTime) {
  const Cluster c = two_types();
  const Topology topo(c);
  ASSERT_EQ(topo.chips(), 8);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_NEAR(alone(topo, a, b, 1e9), c.link(a, b).seconds(1e9), 1e-12)
          << a << " -> " << b << " (" << link_class_name(c.link_class(a, b)) << ")";
    }
  // Spelled out: cross-type at the slower chip's 4 GB/s, halved by time_scale 2, latency 30 us
  // doubled.
  EXPECT_NEAR(alone(topo, 0, 4, 1e9), 60e-6 + 1e9 / 2e9, 1e-12);
}

TEST(Topology, TransfersShareAPortOnlyWithinALinkClass) {
  const Cluster c = two_types();
  const Topology topo(c);
  FlowNetwork net = topo.network();
  // Chip 0 sends to chips 2 and 3 (node 1, inter-node: both through its 12.5 GB/s interface)
  // and to chip 1 (its own node: the scale-up port, not shared with them).
  const FlowId to2 = net.start(topo.path(0, 2), 1e9);
  const FlowId to3 = net.start(topo.path(0, 3), 1e9);
  const FlowId to1 = net.start(topo.path(0, 1), 1e9);
  EXPECT_DOUBLE_EQ(net.rate(to2), 25e9 / 2 / 2);
  EXPECT_DOUBLE_EQ(net.rate(to3), 25e9 / 2 / 2);
  EXPECT_DOUBLE_EQ(net.rate(to1), 100e9 / 2);
  // Chips 0 and 1 both send to chip 4 across vendors: chip 4's receive port (2 GB/s after the
  // time scale) is shared.
  FlowNetwork cross = topo.network();
  const FlowId x0 = cross.start(topo.path(0, 4), 1e9);
  const FlowId x1 = cross.start(topo.path(1, 4), 1e9);
  EXPECT_DOUBLE_EQ(cross.rate(x0), 1e9);
  EXPECT_DOUBLE_EQ(cross.rate(x1), 1e9);
}

TEST(Topology, AMissingLinkClassIsNamed) {
  Cluster c = two_types();
  c.cross_type.erase("b");
  const Topology topo(c);
  try {
    topo.path(0, 4);
    FAIL() << "no error for a missing cross-type link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two_types: no cross_type link between chip 0 (a) and "
                                         "chip 4 (b)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(topo.path(0, 2));
}

}  // namespace
}  // namespace h2::parallel::sim
