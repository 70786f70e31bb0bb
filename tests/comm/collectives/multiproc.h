// Multi-process test harness: runs a body in `size` forked ranks that join one job through a
// store served by a process of its own, on loopback, over the UCX transports named by `ucx_tls`.
// Each rank reports its exit code and, on failure, its error message through a pipe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/world/world.h"
#include "core/runtime.h"

namespace h2::comm::testing {

struct RankContext {
  World& world;
  Runtime& runtime;
  Device& device;  // the device this rank joined with (RunOptions::device)
  Communicator& comm() { return world.comm(); }
  int rank() const { return world.info().rank; }
  int size() const { return world.info().size; }
};

struct RankOutcome {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  std::string message;  // what the rank's failure said ("" on success)
  double seconds = 0;   // from the start of the run to the rank's exit
};

struct RunOptions {
  std::string ucx_tls = "sm,self";
  double comm_timeout_s = 60;
  // H2_COMM_TIMEOUT of particular ranks, where it differs from comm_timeout_s: which rank of a
  // waiting chain times out first then does not depend on when each began to wait.
  std::map<int, double> comm_timeout_s_of_rank;
  std::map<std::string, std::string> env;  // extra variables set in every rank
  // Called in the parent once every rank started, with their pids (to kill one, say).
  std::function<void(const std::vector<int>& pids)> while_running;
  // Ranks still alive then are killed (times H2_TEST_TIMING_SLACK, set by tools/sanitize.sh).
  std::chrono::seconds harness_limit{240};
  // The device each rank computes on ("cpu", "vchip:1", ...); decides the world's shape.
  std::function<std::string(int rank)> device = [](int) { return std::string("cpu"); };
  // Changes a rank's placement as a launcher would give it (local rank and size, node); by
  // default every rank is on one node in rank order.
  std::function<void(RankInfo&)> place;
};

// The body throws (gtest assertions do not cross processes) to fail a rank.
using RankBody = std::function<void(RankContext&)>;

std::vector<RankOutcome> run_ranks(int size, const RankBody& body, const RunOptions& options = {});

// "rank 0: ok; rank 1: exit 1 (message)" for failure messages.
std::string describe(const std::vector<RankOutcome>& outcomes);

// Fails the current test, showing every rank's outcome, unless every rank exited 0.
void expect_all_ok(const std::vector<RankOutcome>& outcomes);

}  // namespace h2::comm::testing
