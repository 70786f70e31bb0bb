// The data plane's listeners stay off interfaces the job does not use: loopback alone on one
// machine, the interface that reaches the store otherwise, the user's choice when given
// (H2_COMM_INTERFACE, or UCX_NET_DEVICES left to UCX).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "comm/world/data_plane.h"

namespace h2::comm {
namespace {

EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional(it->second);
  };
}

RankInfo job(int size, int local_size, std::string store_host = "127.0.0.1") {
  RankInfo info;
  info.size = size;
  info.local_size = local_size;
  info.store_host = std::move(store_host);
  return info;
}

TEST(DataPlane, OneMachineListensOnLoopbackOnly) {
  EXPECT_EQ(choose_data_plane(job(4, 4), env_of({})).devices, "lo");
}

TEST(DataPlane, TheUsersChoiceWins) {
  EXPECT_EQ(choose_data_plane(job(4, 4), env_of({{"H2_COMM_INTERFACE", "eth1"}})).devices, "eth1");
  // UCX reads its own variable: H2 applies nothing on top of it.
  EXPECT_EQ(choose_data_plane(job(8, 4), env_of({{"UCX_NET_DEVICES", "eth0"}})).devices, "");
}

// Several machines: the interface that routes to the store host. With the store on this
// machine's loopback address, that is lo (the only interface every test machine has).
TEST(DataPlane, SeveralMachinesUseTheInterfaceThatReachesTheStore) {
  EXPECT_EQ(interface_towards("127.0.0.1"), "lo");
  const DataPlaneChoice choice = choose_data_plane(job(8, 4, "127.0.0.1"), env_of({}));
  EXPECT_EQ(choice.devices.substr(0, 2), "lo") << choice.reason;
  EXPECT_EQ(interface_towards("no-such-host.invalid"), "");
  EXPECT_EQ(choose_data_plane(job(8, 4, "no-such-host.invalid"), env_of({})).devices, "");
}

}  // namespace
}  // namespace h2::comm
