// Exposed communication: how much of a pipeline step each rank spent waiting for the links rather
// than for its peers' compute, from every rank's timeline events of the step on one clock
// (timeline.h; trace_events.h aligns the clocks). A rank's exposed communication is
//
//   - in every compute action that waited for an incoming activation (F) or gradient (B, I):
//     the part of the wait after the last of its producers posted the data (the end of their
//     SEND_F or SEND_B for that micro-batch): before that, the rank waited for the producer's
//     compute, a pipeline bubble; after it, for the transfer;
//   - every blocking collective of the step (UNSHARD: an FSDP gather; REDUCE_GRAD) whole;
//   - inside compute actions, the waits for transfers the action did not consume (comm_wait_us):
//     prefetched FSDP gathers (with overlap, UNSHARD only posts the gathers and each unit waits
//     for its own) and, with overlap off, the rank's own sends.
//
// A wait whose producers' sends are not among the events (a producer on the same rank) counts
// nothing. The Chrome trace holds the same events (its "wait" children and SEND spans), so the
// figure can be recomputed from the trace.
#pragma once

#include <vector>

#include "parallel/pipeline/timeline.h"

namespace h2::parallel::pipeline {

// Milliseconds per rank, from each rank's events (microseconds on one clock).
std::vector<double> exposed_comm_ms(const std::vector<std::vector<TimelineEvent>>& events_by_rank);

}  // namespace h2::parallel::pipeline
