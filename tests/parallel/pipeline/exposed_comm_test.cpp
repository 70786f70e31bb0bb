// Exposed communication from timeline events (parallel/pipeline/exposed_comm.h), on hand-made
// events whose answer is counted by hand: a wait splits at the producer's send into a bubble
// (before) and link time (after); a group's several producers count from the last; collectives
// count whole; a wait with no remote producer counts nothing; waits for prefetched gathers inside
// a compute count whole.
#include "parallel/pipeline/exposed_comm.h"

#include <gtest/gtest.h>

namespace h2::parallel::pipeline {
namespace {

TimelineEvent event(Action a, double start, double ready, double end) {
  return {.action = a, .step = 1, .start_us = start, .ready_us = ready, .end_us = end};
}

TEST(ExposedComm, AWaitCountsFromTheProducersSend) {
  using K = ActionKind;
  // Rank 0 runs stage 0, rank 1 stage 1 (microseconds).
  const std::vector<TimelineEvent> rank0 = {
      event(Action::compute(K::F, 0, 0), 0, 0, 10),
      event(Action::comm(K::SEND_F, 0, 0, 1), 10, 10, 11),
      // Waits 30 -> 50 for the gradient posted at 41: 9 us of link, 11 of rank 1's compute.
      event(Action::compute(K::B, 0, 0), 30, 50, 70),
      event(Action::stage_wide(K::REDUCE_GRAD, 0), 70, 70, 72),  // 2 us, whole
  };
  const std::vector<TimelineEvent> rank1 = {
      event(Action::stage_wide(K::UNSHARD, 1), 0, 0, 3),  // 3 us, whole
      event(Action::comm(K::RECV_F, 1, 0, 0), 3, 3, 4),
      // Waits 5 -> 15 for the activation posted at 11: 4 us of link, 6 of rank 0's forward.
      event(Action::compute(K::F, 1, 0), 5, 15, 25),
      event(Action::compute(K::B, 1, 0), 25, 25, 40),  // no wait for its input, but:
      event(Action::comm(K::SEND_B, 1, 0, 0), 40, 40, 41),
  };
  std::vector<TimelineEvent> prefetching = rank1;
  prefetching[3].comm_wait_us = 2.5;  // a unit of B waited 2.5 us for its prefetched gather
  const std::vector<double> ms = exposed_comm_ms({rank0, rank1});
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_DOUBLE_EQ(ms[0], (9 + 2) / 1000.0);
  EXPECT_DOUBLE_EQ(ms[1], (3 + 4) / 1000.0);
  EXPECT_DOUBLE_EQ(exposed_comm_ms({rank0, prefetching})[1], (3 + 4 + 2.5) / 1000.0);
}

TEST(ExposedComm, AGroupWaitsForItsLastProducer) {
  using K = ActionKind;
  // Stage 0 on ranks 0 and 1 (a group of two), stage 1 on rank 2; rank 1 posts its rows later.
  const std::vector<std::vector<TimelineEvent>> events = {
      {event(Action::comm(K::SEND_F, 0, 3, 1), 10, 10, 12)},
      {event(Action::comm(K::SEND_F, 0, 3, 1), 10, 10, 20)},
      {event(Action::compute(K::F, 1, 3), 0, 26, 40),
       // A wait for a micro-batch no remote rank sent (its producer shares the rank): nothing.
       event(Action::compute(K::F, 1, 4), 40, 45, 50)},
  };
  const std::vector<double> ms = exposed_comm_ms(events);
  EXPECT_DOUBLE_EQ(ms[0], 0.0);
  EXPECT_DOUBLE_EQ(ms[1], 0.0);
  EXPECT_DOUBLE_EQ(ms[2], 6 / 1000.0);  // from 20, the later send, to 26
}

}  // namespace
}  // namespace h2::parallel::pipeline
