// Timeline and Chrome trace without devices, driven by an injected clock:
// - busy, wall and bubble of a step with controlled durations (input waits and waits for
//   prefetched gathers count as idle);
// - peak stashes from a fake stash counter, the kept-steps bound and misuse errors;
// - the trace JSON parses, with one X event per action (pid rank, tid stage, ts with the clock
//   offset, dur), a "wait" child, and metadata names; transfers on a communication lane;
// - 1F1B (p = 4, m = 8) replayed from the simulator's timeline: the Timeline's figures are the
//   simulator's (bubble 9/33, busy 24 per rank, peak stashes [4, 3, 2, 1]);
// - the metrics helpers (JSON fields, progress fields).
#include "parallel/pipeline/timeline.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/pipeline/trace_events.h"

namespace h2::parallel::pipeline {
namespace {

constexpr double kEps = 1e-9;

// A clock the test sets by hand (microseconds).
struct ManualClock {
  double now = 0;
  Timeline::Clock clock() {
    return [this] { return now; };
  }
};

// Runs one action from `start` to `end` (inputs ready at `ready`, when given).
void run_action(Timeline& t, ManualClock& c, const Action& a, double start, double end,
                double ready = -1) {
  c.now = start;
  t.action_started(a);
  if (ready >= 0) {
    c.now = ready;
    t.action_ready(a);
  }
  c.now = end;
  t.action_finished(a);
}

TEST(PipelineTimeline, BusyWallAndBubbleOfAStep) {
  ManualClock c;
  Timeline t({}, {}, c.clock());
  EXPECT_FALSE(t.last_step());
  c.now = 1000;
  t.step_started();
  run_action(t, c, Action::comm(ActionKind::RECV_F, 1, 0, 0), 1000, 1500);
  // F waits for its input from 2000 to 3000: one millisecond of idle inside the action.
  run_action(t, c, Action::compute(ActionKind::F, 1, 0), 2000, 5000, 3000);
  run_action(t, c, Action::comm(ActionKind::SEND_F, 1, 0, 2), 5000, 5500);
  // B waits 0.5 ms inside for a prefetched FSDP gather of one of its units: idle, not busy.
  c.now = 6000;
  t.action_started(Action::compute(ActionKind::B, 1, 0));
  t.comm_waited(500);
  c.now = 10000;
  t.action_finished(Action::compute(ActionKind::B, 1, 0));
  run_action(t, c, Action::stage_wide(ActionKind::REDUCE_GRAD, 1), 10000, 11000);
  c.now = 13000;
  t.step_finished();

  const auto s = t.last_step();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 1);
  // F from ready, B less its gather wait; transfers and reduce idle.
  EXPECT_NEAR(s->busy_ms, 2.0 + 3.5, kEps);
  EXPECT_NEAR(s->wall_ms, 12.0, kEps);
  EXPECT_NEAR(s->bubble, 1 - 5.5 / 12.0, kEps);
  EXPECT_DOUBLE_EQ(s->start_us, 1000);
  EXPECT_DOUBLE_EQ(s->end_us, 13000);
  EXPECT_EQ(s->peak_stash, (std::map<int, int>{{1, 0}}));  // no counter: the stage, at 0
  ASSERT_EQ(t.kept_steps().size(), 1u);
  const auto& events = t.kept_steps().front().events;
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[1].action, Action::compute(ActionKind::F, 1, 0));
  EXPECT_DOUBLE_EQ(events[1].start_us, 2000);
  EXPECT_DOUBLE_EQ(events[1].ready_us, 3000);
  EXPECT_DOUBLE_EQ(events[1].end_us, 5000);
  EXPECT_DOUBLE_EQ(events[0].ready_us, events[0].start_us);
  EXPECT_DOUBLE_EQ(events[3].comm_wait_us, 500);
  EXPECT_DOUBLE_EQ(events[1].comm_wait_us, 0);
}

TEST(PipelineTimeline, PeakStashPerStageFromTheCounter) {
  ManualClock c;
  std::map<int, int> stashed;
  Timeline t([&] { return stashed; }, {}, c.clock());
  t.step_started();
  // Stage 0 and stage 4 (two chunks on this rank): F stashes, B releases.
  const auto f = [&](int stage, int mb) {
    c.now += 1;
    t.action_started(Action::compute(ActionKind::F, stage, mb));
    ++stashed[stage];
    t.action_finished(Action::compute(ActionKind::F, stage, mb));
  };
  const auto b = [&](int stage, int mb) {
    c.now += 1;
    t.action_started(Action::compute(ActionKind::B, stage, mb));
    if (--stashed[stage] == 0) stashed.erase(stage);
    t.action_finished(Action::compute(ActionKind::B, stage, mb));
  };
  f(0, 0), f(0, 1), f(4, 0), f(0, 2), b(4, 0), b(0, 0), f(4, 1), b(4, 1), b(0, 1), b(0, 2);
  t.step_finished();
  EXPECT_EQ(t.last_step()->peak_stash, (std::map<int, int>{{0, 3}, {4, 1}}));
  EXPECT_EQ(t.stages(), (std::set<int>{0, 4}));
  // The next step's peaks start afresh.
  t.step_started();
  f(0, 0), b(0, 0);
  t.step_finished();
  EXPECT_EQ(t.last_step()->peak_stash, (std::map<int, int>{{0, 1}}));
}

TEST(PipelineTimeline, KeepsTheLastStepsOnly) {
  ManualClock c;
  Timeline t({}, {.keep_steps = 2, .first_step = 11}, c.clock());
  for (int i = 0; i < 5; ++i) {
    t.step_started();
    run_action(t, c, Action::compute(ActionKind::F, 0, 0), c.now, c.now + 10);
    c.now += 5;
    t.step_finished();
  }
  EXPECT_EQ(t.steps_finished(), 5);
  ASSERT_EQ(t.kept_steps().size(), 2u);
  EXPECT_EQ(t.kept_steps()[0].stats.step, 14);
  EXPECT_EQ(t.kept_steps()[1].stats.step, 15);
  EXPECT_EQ(t.kept_steps()[1].events.at(0).step, 15);
  EXPECT_EQ(t.last_step()->step, 15);
  EXPECT_THROW(Timeline({}, {.keep_steps = 0}), Error);
}

TEST(PipelineTimeline, OutOfOrderCallsAreReported) {
  const Action f = Action::compute(ActionKind::F, 0, 3), b = Action::compute(ActionKind::B, 0, 3);
  Timeline t({});
  EXPECT_THROW(t.action_started(f), Error);  // outside a step
  EXPECT_THROW(t.step_finished(), Error);
  t.step_started();
  EXPECT_THROW(t.step_started(), Error);
  t.action_started(f);
  try {
    t.action_finished(b);
    FAIL() << "a finish for another action passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("B0.3 finished while F0.3 is running"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(t.action_ready(b), Error);
  EXPECT_THROW(t.step_finished(), Error);  // F0.3 still running
  t.action_finished(f);
  t.step_finished();
  EXPECT_EQ(t.steps_finished(), 1);
}

nlohmann::json parse(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);  // throws on malformed JSON
  EXPECT_EQ(j.at("displayTimeUnit"), "ms");
  EXPECT_TRUE(j.at("traceEvents").is_array());
  return j;
}

// The X events of the trace that stand for actions (not "wait" children).
std::vector<nlohmann::json> action_events(const nlohmann::json& trace) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("cat") != "wait" && e.at("cat") != "transfer") out.push_back(e);
  return out;
}

const nlohmann::json* metadata(const nlohmann::json& trace, const std::string& name, int pid,
                               int tid = -1) {
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == name && e.at("pid") == pid &&
        (tid < 0 || e.value("tid", -1) == tid))
      return &e;
  return nullptr;
}

TEST(PipelineTraceEvents, OneCompleteEventPerActionWithMetadata) {
  ManualClock c;
  Timeline t({}, {}, c.clock());
  t.set_clock_offset_us(100);
  t.step_started();
  run_action(t, c, Action::comm(ActionKind::RECV_F, 2, 0, 1), 0, 1);
  run_action(t, c, Action::compute(ActionKind::F, 2, 0), 1, 5, 3);
  run_action(t, c, Action::comm(ActionKind::SEND_F, 2, 0, 3), 5, 6);
  run_action(t, c, Action::compute(ActionKind::F, 6, 0), 6, 9);
  run_action(t, c, Action::stage_wide(ActionKind::REDUCE_GRAD, 2), 9, 11.5);
  t.step_finished();

  const nlohmann::json trace = parse(trace_json({trace_events_fragment(t, 2)}));
  const auto events = action_events(trace);
  ASSERT_EQ(events.size(), 5u);
  const auto& recv = events[0];
  EXPECT_EQ(recv.at("name"), "RECV_F2.0<-1");
  EXPECT_EQ(recv.at("cat"), "comm");
  EXPECT_EQ(recv.at("args").at("peer"), 1);
  const auto& f = events[1];
  EXPECT_EQ(f.at("name"), "F2.0");
  EXPECT_EQ(f.at("cat"), "compute");
  EXPECT_EQ(f.at("pid"), 2);
  EXPECT_EQ(f.at("tid"), 2);
  EXPECT_DOUBLE_EQ(f.at("ts").get<double>(), 101);  // clock offset applied
  EXPECT_DOUBLE_EQ(f.at("dur").get<double>(), 4);
  EXPECT_EQ(f.at("args").at("step"), 1);
  EXPECT_EQ(f.at("args").at("microbatch"), 0);
  EXPECT_DOUBLE_EQ(f.at("args").at("wait_us").get<double>(), 2);
  EXPECT_EQ(events[3].at("tid"), 6);
  EXPECT_EQ(events[4].at("name"), "REDUCE_GRAD2");
  EXPECT_EQ(events[4].at("cat"), "fsdp");
  EXPECT_DOUBLE_EQ(events[4].at("dur").get<double>(), 2.5);
  EXPECT_FALSE(events[4].at("args").contains("microbatch"));

  // The wait is a child of F2.0: same track, inside it.
  int waits = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "wait") {
      ++waits;
      EXPECT_EQ(e.at("tid"), 2);
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 101);
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2);
    }
  EXPECT_EQ(waits, 1);

  const auto* process = metadata(trace, "process_name", 2);
  ASSERT_TRUE(process);
  EXPECT_EQ(process->at("args").at("name"), "rank 2 (stages 2, 6)");
  const auto* thread = metadata(trace, "thread_name", 2, 6);
  ASSERT_TRUE(thread);
  EXPECT_EQ(thread->at("args").at("name"), "stage 6");
  EXPECT_TRUE(metadata(trace, "process_sort_index", 2));
  EXPECT_TRUE(metadata(trace, "thread_sort_index", 2, 2));
}

// The communication lane: each transfer from its posting to its observed completion, on a track
// of its own below the stages; one posted and never seen complete ends with the step.
TEST(PipelineTraceEvents, TransfersFillACommunicationLane) {
  ManualClock c;
  Timeline t({}, {}, c.clock());
  t.step_started();
  c.now = 2;
  t.transfer_posted(7, "gather unit 3");
  run_action(t, c, Action::compute(ActionKind::F, 1, 0), 2, 6);
  t.transfer_posted(8, "SEND_F 1.0 -> rank 2");
  c.now = 9;
  t.transfer_done(7);
  c.now = 12;
  t.step_finished();
  EXPECT_THROW(t.transfer_done(8), Error);  // closed with the step
  ASSERT_EQ(t.kept_steps().back().transfers.size(), 2u);

  const nlohmann::json trace = parse(trace_json({trace_events_fragment(t, 0)}));
  std::map<std::string, nlohmann::json> spans;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "transfer") spans[e.at("name")] = e;
  ASSERT_EQ(spans.size(), 2u);
  const auto& gather = spans.at("gather unit 3");
  EXPECT_DOUBLE_EQ(gather.at("ts").get<double>(), 2);
  EXPECT_DOUBLE_EQ(gather.at("dur").get<double>(), 7);
  EXPECT_EQ(gather.at("args").at("step"), 1);
  const auto& send = spans.at("SEND_F 1.0 -> rank 2");
  EXPECT_DOUBLE_EQ(send.at("ts").get<double>(), 6);
  EXPECT_DOUBLE_EQ(send.at("dur").get<double>(), 6);  // to the step's end
  EXPECT_EQ(send.at("tid"), gather.at("tid"));
  EXPECT_NE(send.at("tid"), 1);  // not the stage's track
  const auto* lane = metadata(trace, "thread_name", 0, send.at("tid").get<int>());
  ASSERT_TRUE(lane);
  EXPECT_EQ(lane->at("args").at("name"), "communication");
  EXPECT_EQ(action_events(trace).size(), 1u);  // the lane is not an action
}

TEST(PipelineTraceEvents, EmptyTimelinesStillNameTheirProcess) {
  Timeline idle({});
  const nlohmann::json trace = parse(trace_json({"", trace_events_fragment(idle, 1)}));
  EXPECT_TRUE(action_events(trace).empty());
  const auto* process = metadata(trace, "process_name", 1);
  ASSERT_TRUE(process);
  EXPECT_EQ(process->at("args").at("name"), "rank 1");
}

TEST(PipelineTraceEvents, WriteTraceFileReplacesTheFileWhole) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("h2_timeline_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  const std::string path = (dir / "sub" / "trace.json").string();
  write_trace_file(path, "{\"traceEvents\": []}");
  write_trace_file(path, "{}");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{}");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
  EXPECT_THROW(write_trace_file("", "{}"), Error);
}

// Feeds each rank's actions at the simulator's times (1 unit = 1 ms), with a stash counter that
// an F raises and a B (or W) lowers, and returns one Timeline per rank.
std::vector<std::unique_ptr<Timeline>> replay(const Schedule& schedule, const SimulationResult& sim,
                                              std::vector<ManualClock>& clocks,
                                              std::vector<std::map<int, int>>& stashed) {
  std::vector<std::unique_ptr<Timeline>> out;
  for (int r = 0; r < schedule.ranks; ++r) {
    ManualClock& c = clocks[size_t(r)];
    auto& stash = stashed[size_t(r)];
    auto t = std::make_unique<Timeline>([&stash] { return stash; }, TimelineOptions{}, c.clock());
    c.now = 0;
    t->step_started();
    const auto& actions = schedule.per_rank[size_t(r)];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const Interval& when = sim.timeline[size_t(r)][i];
      c.now = when.start * 1000;
      t->action_started(a);
      if (a.kind == ActionKind::F) ++stash[a.stage];
      if (a.kind == ActionKind::B || a.kind == ActionKind::W) --stash[a.stage];
      c.now = when.end * 1000;
      t->action_finished(a);
    }
    c.now = sim.finish[size_t(r)] * 1000;
    t->step_finished();
    out.push_back(std::move(t));
  }
  return out;
}

TEST(PipelineTimeline, ReproducesTheSimulatorsFiguresFor1F1B) {
  const int p = 4, m = 8;
  const Schedule schedule = add_send_recv(one_f_one_b(p, m));
  const SimulationResult sim = simulate(schedule, Durations(p));
  ASSERT_DOUBLE_EQ(sim.makespan, 33);
  std::vector<ManualClock> clocks(static_cast<size_t>(p));
  std::vector<std::map<int, int>> stashed(static_cast<size_t>(p));
  const auto timelines = replay(schedule, sim, clocks, stashed);

  std::vector<PipelineStepStats> ranks;
  for (int r = 0; r < p; ++r) {
    const PipelineStepStats s = *timelines[size_t(r)]->last_step();
    EXPECT_NEAR(s.busy_ms, sim.busy[size_t(r)], kEps) << "rank " << r;
    EXPECT_NEAR(s.wall_ms, sim.finish[size_t(r)], kEps) << "rank " << r;
    EXPECT_EQ(s.peak_stash, (std::map<int, int>{{r, sim.peak_stash[size_t(r)]}})) << "rank " << r;
    ranks.push_back(s);
  }
  // Rank 0 ends last, so its own bubble is the job's.
  EXPECT_NEAR(ranks[0].bubble, 9.0 / 33, kEps);
  const PipelineStepStats job = combine_step_stats(ranks);
  EXPECT_NEAR(job.bubble, sim.bubble_fraction, kEps);
  EXPECT_NEAR(job.bubble, double(p - 1) / (m + p - 1), kEps);
  EXPECT_NEAR(job.wall_ms, 33, kEps);
  EXPECT_NEAR(job.busy_ms, 24, kEps);
  EXPECT_EQ(job.peak_stash, (std::map<int, int>{{0, 4}, {1, 3}, {2, 2}, {3, 1}}));

  // The merged trace has every rank's actions, each on its rank's process and stage's thread.
  std::vector<std::string> fragments;
  for (int r = 0; r < p; ++r) fragments.push_back(trace_events_fragment(*timelines[size_t(r)], r));
  const nlohmann::json trace = parse(trace_json(fragments));
  size_t actions = 0;
  for (const auto& list : schedule.per_rank) actions += list.size();
  const auto events = action_events(trace);
  ASSERT_EQ(events.size(), actions);
  for (const auto& e : events) EXPECT_EQ(e.at("pid"), e.at("tid"));
  EXPECT_EQ(metadata(trace, "process_name", 3)->at("args").at("name"), "rank 3 (stage 3)");
}

TEST(PipelineTimeline, CombiningRanksChecksTheirSteps) {
  EXPECT_THROW(combine_step_stats({}), Error);
  PipelineStepStats a, b;
  a.step = 3, b.step = 4;
  EXPECT_THROW(combine_step_stats({a, b}), Error);
}

TEST(PipelineStepStats, MetricsFields) {
  PipelineStepStats s;
  s.bubble = 0.27272727;
  s.busy_ms = 24;
  s.wall_ms = 33;
  s.peak_stash = {{0, 4}, {1, 3}, {2, 2}, {3, 1}};
  nlohmann::json j = {{"step", 5}};
  add_json_fields(s, j);
  EXPECT_EQ(j.at("step"), 5);
  EXPECT_DOUBLE_EQ(j.at("bubble").get<double>(), 0.27272727);
  EXPECT_DOUBLE_EQ(j.at("busy_ms").get<double>(), 24);
  EXPECT_DOUBLE_EQ(j.at("wall_ms").get<double>(), 33);
  EXPECT_EQ(j.at("peak_stash"), nlohmann::json::parse(R"({"0": 4, "1": 3, "2": 2, "3": 1})"));
  EXPECT_EQ(progress_fields(s), "bubble 27.3% | stash 4/3/2/1");
  EXPECT_EQ(progress_fields(PipelineStepStats{}), "bubble 0.0%");
}

}  // namespace
}  // namespace h2::parallel::pipeline
