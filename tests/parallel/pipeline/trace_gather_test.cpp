// The job-wide timeline functions in three forked ranks (the comm test harness), each rank's
// clock skewed by a second per rank on purpose:
// - align_clocks recovers the skew within the barrier's exit skew;
// - gather_step_stats gives every rank the job's step figures (peak stash of every stage);
// - gather_trace_json returns the merged trace on rank 0 only, with every rank's events on one
//   clock, and write_trace_file stores it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "multiproc.h"
#include "parallel/pipeline/timeline.h"
#include "parallel/pipeline/trace_events.h"

namespace h2::parallel::pipeline {
namespace {

using comm::testing::RankContext;
using comm::testing::run_ranks;

constexpr double kSkewUs = 1e6;         // rank r's clock reads r seconds ahead
constexpr double kToleranceUs = 100e3;  // barrier exit skew on 2 shared cores, generously

// steady_clock is one clock for every process of a host; the skew is the only difference.
Timeline::Clock skewed_clock(int rank) {
  return [rank] {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    return std::chrono::duration<double, std::micro>(now).count() + rank * kSkewUs;
  };
}

void body(RankContext& ctx, const std::string& trace_path) {
  const int rank = ctx.rank(), n = ctx.size();
  std::map<int, int> stashed;
  Timeline timeline([&stashed] { return stashed; }, {}, skewed_clock(rank));
  align_clocks(ctx.comm(), ctx.device, timeline);
  H2_CHECK(std::abs(timeline.clock_offset_us() + rank * kSkewUs) < kToleranceUs,
           "rank {}: clock offset {} us, expected {}", rank, timeline.clock_offset_us(),
           -rank * kSkewUs);

  const PipelineStepStats none = gather_step_stats(ctx.comm(), ctx.device, timeline);
  H2_CHECK(none.step == 0 && none.peak_stash.empty(), "rank {}: figures before any step", rank);

  // One step: rank r stashes r + 1 activations of stage r.
  ctx.comm().barrier();
  timeline.step_started();
  const Action f = Action::compute(ActionKind::F, rank, 0);
  timeline.action_started(f);
  timeline.action_ready(f);
  stashed[rank] = rank + 1;
  timeline.action_finished(f);
  timeline.step_finished();

  const PipelineStepStats job = gather_step_stats(ctx.comm(), ctx.device, timeline);
  const PipelineStepStats own = *timeline.last_step();
  H2_CHECK(job.step == 1, "rank {}: job step {}", rank, job.step);
  H2_CHECK(job.peak_stash == (std::map<int, int>{{0, 1}, {1, 2}, {2, 3}}),
           "rank {}: job peak stash of {} stages", rank, job.peak_stash.size());
  H2_CHECK(job.bubble >= 0 && job.bubble <= 1 && job.wall_ms >= own.wall_ms &&
               job.wall_ms < kToleranceUs / 1000 + own.wall_ms,
           "rank {}: job bubble {} over {} ms (own step {} ms)", rank, job.bubble, job.wall_ms,
           own.wall_ms);

  const std::string json = gather_trace_json(ctx.comm(), ctx.device, timeline);
  if (rank != 0) {
    H2_CHECK(json.empty(), "rank {} got {} bytes of trace", rank, json.size());
    return;
  }
  write_trace_file(trace_path, json);
  std::ifstream in(trace_path);
  std::stringstream text;
  text << in.rdbuf();
  H2_CHECK(text.str() == json, "the trace file holds {} bytes, not {}", text.str().size(),
           json.size());
  const nlohmann::json trace = nlohmann::json::parse(json);
  std::vector<double> starts(size_t(n), -1);
  int names = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      const int pid = e.at("pid");
      H2_CHECK(e.at("args").at("name") == fmt::format("rank {} (stage {})", pid, pid),
               "process {} named {}", pid, e.at("args").at("name").dump());
      ++names;
    }
    if (e.at("ph") == "X" && e.at("cat") == "compute") {
      const int pid = e.at("pid");
      H2_CHECK(e.at("name") == fmt::format("F{}.0", pid) && e.at("tid") == pid,
               "rank {}'s event {}", pid, e.dump());
      starts.at(size_t(pid)) = e.at("ts");
    }
  }
  H2_CHECK(names == n, "{} process names for {} ranks", names, n);
  // The step followed a barrier on every rank: on one clock, its starts are close.
  for (int r = 0; r < n; ++r)
    H2_CHECK(starts[size_t(r)] >= 0 && std::abs(starts[size_t(r)] - starts[0]) < kToleranceUs,
             "rank {}'s F at {} us, rank 0's at {} us", r, starts[size_t(r)], starts[0]);
}

TEST(PipelineTraceGather, AlignsClocksAndMergesEveryRanksEvents) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("h2_trace_gather_" + std::to_string(::getpid()));
  const std::string path = (dir / "trace.json").string();
  const auto outcomes = run_ranks(3, [&](RankContext& ctx) { body(ctx, path); });
  comm::testing::expect_all_ok(outcomes);
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace h2::parallel::pipeline
