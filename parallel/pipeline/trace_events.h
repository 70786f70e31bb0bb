// The job-wide view of the ranks' timelines (timeline.h): clock alignment, the job's step
// figures, and one Chrome trace-event JSON file (Perfetto, chrome://tracing) of every rank.
//
// Trace: {"traceEvents": [...], "displayTimeUnit": "ms"}. Every recorded action is one complete
// event {"name": "F3.7", "cat": "compute" | "comm" | "fsdp", "ph": "X", "ts": us, "dur": us,
// "pid": rank, "tid": stage, "args": {"step", "microbatch", "peer"?, "wait_us"?}}; REDUCE_GRAD,
// UNSHARD and RESHARD are "fsdp". A compute action that waited for its inputs also holds a child
// event "wait" (cat "wait") over the wait. Metadata events name each process
// ("rank 0 (stage 0, 2)") and thread ("stage 2") and sort them by rank and stage.
//
// Clocks: each rank's timestamps are its Timeline's clock plus an offset onto rank 0's, measured
// by align_clocks right before the first step: every rank leaves a barrier, reads its clock, and
// the readings are gathered; the offset is rank 0's reading minus the rank's, the median over
// several barriers. Its error is the barrier's exit skew: ranks leave a dissemination barrier
// within about log2(ranks) message latencies of each other (microseconds on one host, tens of
// microseconds over TCP), more when ranks share cores and one is descheduled, which the median
// over rounds filters out. Drift after alignment is not corrected (steady clocks, NTP-slewed
// across hosts: microseconds per second at worst).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "parallel/pipeline/timeline.h"

namespace h2::parallel::pipeline {

// Collective over `job`: measures and stores the timeline's clock offset (see above). Call once,
// on every rank, right before the first step.
void align_clocks(comm::Communicator& job, Device& host, Timeline& timeline, int rounds = 7);

// Collective over `job`: the job's figures for the timeline's last finished step (every rank
// must have finished the same number of steps), on every rank (combine_step_stats). The wall
// time spans the ranks' aligned clocks; if any rank's timeline was not aligned, it is the
// longest rank's step. Returns default figures (step 0) when no step has finished.
PipelineStepStats gather_step_stats(comm::Communicator& job, Device& host, const Timeline& mine);

// This rank's trace events (its kept steps plus metadata), comma-separated, without brackets,
// with times shifted by the timeline's clock offset.
std::string trace_events_fragment(const Timeline& timeline, int rank);
// The trace document from every rank's fragment (empty fragments are skipped).
std::string trace_json(const std::vector<std::string>& fragments);

// Collective over `job`: every rank's fragment gathered; the trace document on rank 0, "" on the
// other ranks.
std::string gather_trace_json(comm::Communicator& job, Device& host, const Timeline& mine);

// Writes `json` to `path` (parent folders created) under a temporary name, then renames it into
// place, so a reader never sees half a trace. h2::Error names the path on failure.
void write_trace_file(const std::string& path, const std::string& json);

}  // namespace h2::parallel::pipeline
