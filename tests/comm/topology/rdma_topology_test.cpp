// RDMA discovery: the link-rate table against the InfiniBand spec's nominal rates, and discovery
// on this machine, which must either report well-formed ports or none with the explanatory note.
#include "comm/topology/rdma_topology.h"

#include <gtest/gtest.h>

namespace h2::comm {
namespace {

// ibv_port_attr encodings.
constexpr uint8_t k1x = 1, k4x = 2, k8x = 4, k12x = 8, k2x = 16;
constexpr uint32_t kSdr = 1, kDdr = 2, kQdr = 4, kFdr10 = 8, kFdr = 16, kEdr = 32, kHdr = 64,
                   kNdr = 128, kXdr = 256;

TEST(IbvLinkGbps, MatchesTheSpecRates) {
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kEdr), 100);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kHdr), 200);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k1x, kNdr), 100);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kNdr), 400);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kXdr), 800);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kFdr), 56);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kFdr10), 40);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kQdr), 40);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k4x, kDdr), 20);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k1x, kSdr), 2.5);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k12x, kSdr), 30);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k8x, kHdr), 400);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k2x, kHdr), 100);
  EXPECT_DOUBLE_EQ(ibv_link_gbps(k2x, kNdr), 200);
}

TEST(IbvLinkGbps, UnknownEncodingsAreZero) {
  EXPECT_EQ(ibv_link_gbps(0, kEdr), 0);
  EXPECT_EQ(ibv_link_gbps(3, kEdr), 0);
  EXPECT_EQ(ibv_link_gbps(k4x, 0), 0);
  EXPECT_EQ(ibv_link_gbps(k4x, 3), 0);
  EXPECT_EQ(ibv_link_gbps(k4x, 512), 0);
}

TEST(DiscoverRdma, ReportsPortsOrSaysWhyThereAreNone) {
  RdmaTopology topology;
  ASSERT_NO_THROW(topology = discover_rdma());
  if (topology.ports.empty()) {
    EXPECT_NE(topology.note.find("no RDMA devices found"), std::string::npos) << topology.note;
  }
  for (const RdmaPort& p : topology.ports) {
    EXPECT_FALSE(p.device.empty());
    EXPECT_GE(p.port, 1);
    EXPECT_FALSE(p.state.empty());
    EXPECT_TRUE(p.link_layer == "InfiniBand" || p.link_layer == "Ethernet" ||
                p.link_layer == "unspecified")
        << p.link_layer;
    EXPECT_GE(p.gbps, 0);
    EXPECT_TRUE(p.mtu == 0 || (p.mtu >= 256 && p.mtu <= 4096)) << p.mtu;
  }
  std::string table = format_rdma_topology(topology);
  EXPECT_FALSE(table.empty());
}

TEST(FormatRdmaTopology, PrintsOneRowPerPortAndTheNote) {
  RdmaTopology topology;
  topology.ports.push_back({"mlx5_0", 1, "PORT_ACTIVE", "InfiniBand", 400, 4096,
                            "fe80:0000:0000:0000:0000:0000:0000:0001"});
  topology.ports.push_back({"mlx5_1", 1, "PORT_DOWN", "Ethernet", 0, 1024, ""});
  topology.note = "mlx5_2: ibv_open_device failed";
  std::string table = format_rdma_topology(topology);
  EXPECT_NE(table.find("mlx5_0"), std::string::npos) << table;
  EXPECT_NE(table.find("400"), std::string::npos) << table;
  EXPECT_NE(table.find("PORT_DOWN"), std::string::npos) << table;
  EXPECT_NE(table.find("mlx5_2: ibv_open_device failed"), std::string::npos) << table;
}

}  // namespace
}  // namespace h2::comm
