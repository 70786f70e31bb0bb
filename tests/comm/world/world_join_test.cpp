// Joining a job refuses, before any connection, a job over several nodes that was left at the
// default store address (each node's 127.0.0.1): the ranks away from rank 0's node would wait out
// the timeout for a store that is not there.
#include <gtest/gtest.h>

#include <string>

#include "backends/registry.h"
#include "comm/world/world.h"
#include "core/error.h"

namespace h2::comm {
namespace {

TEST(WorldJoin, SeveralNodesWithoutAStoreAddressAreRefusedNamingTheVariables) {
  auto runtime = create_runtime(RuntimeOptions::from_env());
  RankInfo info;
  info.rank = 2;
  info.size = 4;
  info.local_rank = 0;
  info.local_size = 2;
  info.node_rank = 1;
  info.launcher = "test";
  info.job_id = "4242";
  info.token = "t";
  try {
    World::join(info, runtime->cpu());
    FAIL() << "joined a job over several nodes at 127.0.0.1";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 2 of 4 (2 on this node)"), std::string::npos) << message;
    EXPECT_NE(message.find("H2_STORE_ADDR=host:port, or MASTER_ADDR and MASTER_PORT"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace h2::comm
