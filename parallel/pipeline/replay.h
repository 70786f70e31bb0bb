// Dependency replay, shared by the validator (deadlock detection) and the simulator (timing).
//
// Every rank runs its list in order. Besides its predecessor on the rank, an action waits for
// the actions that produce its data:
//   F s.m      F s-1.m, or RECV_F s.m<-s-1 when the schedule has transfers and s-1 is remote
//   B/I s.m    F s.m, and the input gradient of s+1.m (its B or I), or RECV_B s.m<-s+1 when the
//              schedule has transfers and s+1 is remote
//   W s.m      I s.m
//   SEND_F     F of its stage and micro-batch;  SEND_B: B or I of its stage and micro-batch
//   RECV_x     the matching SEND_x on the peer (a receive blocks until its send has run; a send
//              never waits for its receive)
//   UNSHARD, RESHARD, REDUCE_GRAD: nothing but their order on the rank.
// Dependencies are named by keys shaped like actions; a B registers both its own key and the
// key "I s.m", so consumers of an input gradient need not know whether the backward was split.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

struct Position {
  int rank = 0;
  size_t index = 0;
};

// The keys `action` waits for (see above). `lowered`: the schedule has SEND/RECV actions.
std::vector<Action> data_dependencies(const Schedule& schedule, const Action& action, bool lowered);

struct ReplayOutcome {
  bool finished = true;
  std::vector<size_t> next;                  // per rank: first action that did not run
  std::vector<std::vector<Action>> waiting;  // per rank: unmet dependency keys of next[rank]
};

// Runs every rank's list under the rules above, calling on_execute(rank, index, producers) for
// each action when it can run (producers: the positions of its data dependencies). Stops when
// every list is done or no rank can move (a deadlock: finished is false).
using ExecuteFn = std::function<void(int rank, size_t index, std::span<const Position> producers)>;
ReplayOutcome replay(const Schedule& schedule, const ExecuteFn& on_execute);

// "rank 1 stuck at index 0: RECV_F1.0<-0 waits for SEND_F0.0->1" for a rank that did not finish.
std::string describe_stuck(const Schedule& schedule, const ReplayOutcome& outcome, int rank);
// Every stuck rank's description, joined by "; ".
std::string describe_deadlock(const Schedule& schedule, const ReplayOutcome& outcome);

}  // namespace h2::parallel::pipeline
