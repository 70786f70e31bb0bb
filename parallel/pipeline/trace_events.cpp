// Clock alignment, job-wide step figures and the Chrome trace of a job (see trace_events.h).
#include "parallel/pipeline/trace_events.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "parallel/exact_gather.h"
#include "parallel/pipeline/exposed_comm.h"

namespace h2::parallel::pipeline {
namespace {

// Every rank's bytes, on every rank: the sizes, then one all-gather of buffers padded to the
// largest.
std::vector<std::string> gather_strings(comm::Communicator& job, Device& host,
                                        const std::string& mine) {
  const auto sizes = gather_doubles(job, host, {double(mine.size())});
  int64_t longest = 0;
  for (const auto& s : sizes) longest = std::max(longest, int64_t(s.at(0)));
  std::vector<std::string> out(sizes.size());
  if (longest == 0) return out;
  Tensor buffer = Tensor::empty({longest}, DType::u8, host);
  std::memset(buffer.data(), 0, size_t(longest));
  std::memcpy(buffer.data(), mine.data(), mine.size());
  Tensor all = Tensor::empty({longest * job.size()}, DType::u8, host);
  job.all_gather(all, buffer);
  const char* bytes = static_cast<const char*>(all.data());
  for (size_t r = 0; r < out.size(); ++r)
    out[r].assign(bytes + int64_t(r) * longest, size_t(sizes[r].at(0)));
  return out;
}

// Every rank's doubles, padded with NaN to the longest list (gather_doubles wants equal counts).
std::vector<std::vector<double>> gather_ragged(comm::Communicator& job, Device& host,
                                               std::vector<double> mine) {
  const auto sizes = gather_doubles(job, host, {double(mine.size())});
  size_t longest = 0;
  for (const auto& s : sizes) longest = std::max(longest, size_t(s.at(0)));
  mine.resize(longest, std::nan(""));
  auto all = gather_doubles(job, host, mine);
  for (size_t r = 0; r < all.size(); ++r) all[r].resize(size_t(sizes[r].at(0)));
  return all;
}

// A JSON string literal (nlohmann's escaping).
std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s)).dump();
}

const char* category(ActionKind kind) {
  if (is_compute(kind)) return "compute";
  if (is_comm(kind)) return "comm";
  return "fsdp";
}

void append_event(std::string& out, const std::string& event) {
  if (!out.empty()) out += ",\n";
  out += event;
}

std::string metadata(const char* name, int pid, const int* tid, const std::string& args) {
  const std::string thread = tid ? fmt::format(",\"tid\":{}", *tid) : std::string();
  return fmt::format("{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{}{},\"args\":{{{}}}}}", name, pid,
                     thread, args);
}

// The Chrome trace thread of each rank's communication lane (after every stage's).
constexpr int kCommLane = 1000000;

}  // namespace

void align_clocks(comm::Communicator& job, Device& host, Timeline& timeline, int rounds) {
  H2_CHECK(rounds >= 1, "clock alignment needs at least one round, not {}", rounds);
  std::vector<double> offsets;
  for (int i = 0; i < rounds; ++i) {
    job.barrier();
    const double now = timeline.now_us();
    const auto readings = gather_doubles(job, host, {now});
    offsets.push_back(readings.at(0).at(0) - now);
  }
  std::nth_element(offsets.begin(), offsets.begin() + rounds / 2, offsets.end());
  timeline.set_clock_offset_us(offsets[size_t(rounds / 2)]);
}

PipelineStepStats gather_step_stats(comm::Communicator& job, Device& host, const Timeline& mine) {
  // [step, aligned, start, end, wall_ms, busy_ms, peaks P, P stage and peak pairs, then per event
  // of the step kind, stage, micro-batch, peer, start, ready, end, comm wait]; empty: no step.
  constexpr size_t kFixed = 7, kPerEvent = 8;
  std::vector<double> mine_packed;
  if (const auto last = mine.last_step()) {
    const double offset = mine.clock_offset_us();
    mine_packed = {double(last->step),
                   mine.aligned() ? 1.0 : 0.0,
                   last->start_us + offset,
                   last->end_us + offset,
                   last->wall_ms,
                   last->busy_ms,
                   double(last->peak_stash.size())};
    for (const auto& [stage, peak] : last->peak_stash) {
      mine_packed.push_back(stage);
      mine_packed.push_back(peak);
    }
    for (const TimelineEvent& e : mine.kept_steps().back().events) {
      const Action& a = e.action;
      mine_packed.insert(
          mine_packed.end(),
          {double(a.kind), double(a.stage), double(a.microbatch), double(a.peer),
           e.start_us + offset, e.ready_us + offset, e.end_us + offset, e.comm_wait_us});
    }
  }
  const auto all = gather_ragged(job, host, mine_packed);
  const size_t finished = size_t(
      std::count_if(all.begin(), all.end(), [](const auto& packed) { return !packed.empty(); }));
  if (finished == 0) return {};
  H2_CHECK(finished == all.size(), "{} of {} ranks have finished a pipeline step", finished,
           all.size());
  const bool aligned =
      std::all_of(all.begin(), all.end(), [](const auto& packed) { return packed[1] != 0; });
  std::vector<PipelineStepStats> ranks;
  std::vector<std::vector<TimelineEvent>> events(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    const std::vector<double>& packed = all[k];
    PipelineStepStats r;
    r.step = int64_t(packed[0]);
    r.start_us = aligned ? packed[2] : 0.0;
    r.end_us = aligned ? packed[3] : packed[4] * 1000.0;
    r.wall_ms = packed[4];
    r.busy_ms = packed[5];
    const size_t peaks_end = kFixed + 2 * size_t(packed[6]);
    for (size_t i = kFixed; i + 1 < peaks_end; i += 2)
      r.peak_stash[int(packed[i])] = int(packed[i + 1]);
    for (size_t i = peaks_end; i + kPerEvent <= packed.size(); i += kPerEvent)
      events[k].push_back({.action = {ActionKind(int(packed[i])), int(packed[i + 1]),
                                      int(packed[i + 2]), int(packed[i + 3])},
                           .step = r.step,
                           .start_us = packed[i + 4],
                           .ready_us = packed[i + 5],
                           .end_us = packed[i + 6],
                           .comm_wait_us = packed[i + 7]});
    ranks.push_back(std::move(r));
  }
  PipelineStepStats job_stats = combine_step_stats(ranks);
  if (aligned) job_stats.rank_exposed_comm_ms = exposed_comm_ms(events);
  return job_stats;
}

std::string trace_events_fragment(const Timeline& timeline, int rank) {
  std::string out;
  std::string stages;
  for (int stage : timeline.stages())
    stages += (stages.empty() ? "" : ", ") + std::to_string(stage);
  const std::string process = stages.empty()
                                  ? fmt::format("rank {}", rank)
                                  : fmt::format("rank {} (stage{} {})", rank,
                                                timeline.stages().size() > 1 ? "s" : "", stages);
  append_event(out, metadata("process_name", rank, nullptr, "\"name\":" + json_string(process)));
  append_event(
      out, metadata("process_sort_index", rank, nullptr, fmt::format("\"sort_index\":{}", rank)));
  for (int stage : timeline.stages()) {
    append_event(
        out, metadata("thread_name", rank, &stage, fmt::format("\"name\":\"stage {}\"", stage)));
    append_event(
        out, metadata("thread_sort_index", rank, &stage, fmt::format("\"sort_index\":{}", stage)));
  }
  const double offset = timeline.clock_offset_us();
  // The communication lane: transfers from posting to their observed completion, below the
  // stages (they overlap each other, so each span is its own complete event on one track).
  const bool any_transfer =
      std::any_of(timeline.kept_steps().begin(), timeline.kept_steps().end(),
                  [](const Timeline::StepRecord& s) { return !s.transfers.empty(); });
  if (any_transfer) {
    append_event(out, metadata("thread_name", rank, &kCommLane, "\"name\":\"communication\""));
    append_event(out, metadata("thread_sort_index", rank, &kCommLane,
                               fmt::format("\"sort_index\":{}", kCommLane)));
  }
  for (const Timeline::StepRecord& step : timeline.kept_steps())
    for (const CommSpan& span : step.transfers)
      append_event(out,
                   fmt::format("{{\"name\":{},\"cat\":\"transfer\",\"ph\":\"X\",\"ts\":{:.3f},"
                               "\"dur\":{:.3f},\"pid\":{},\"tid\":{},\"args\":{{\"step\":{}}}}}",
                               json_string(span.label), span.start_us + offset,
                               span.end_us - span.start_us, rank, kCommLane, step.stats.step));
  for (const Timeline::StepRecord& step : timeline.kept_steps()) {
    for (const TimelineEvent& e : step.events) {
      const Action& a = e.action;
      std::string args = fmt::format("\"step\":{}", e.step);
      if (a.microbatch >= 0) args += fmt::format(",\"microbatch\":{}", a.microbatch);
      if (a.peer >= 0) args += fmt::format(",\"peer\":{}", a.peer);
      const double wait = e.ready_us - e.start_us;
      if (wait > 0) args += fmt::format(",\"wait_us\":{:.3f}", wait);
      if (e.comm_wait_us > 0) args += fmt::format(",\"comm_wait_us\":{:.3f}", e.comm_wait_us);
      append_event(out,
                   fmt::format("{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3f},"
                               "\"dur\":{:.3f},\"pid\":{},\"tid\":{},\"args\":{{{}}}}}",
                               json_string(to_string(a)), category(a.kind), e.start_us + offset,
                               e.end_us - e.start_us, rank, a.stage, args));
      if (wait > 0)
        append_event(out, fmt::format("{{\"name\":\"wait\",\"cat\":\"wait\",\"ph\":\"X\","
                                      "\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":{},\"tid\":{}}}",
                                      e.start_us + offset, wait, rank, a.stage));
    }
  }
  return out;
}

std::string trace_json(const std::vector<std::string>& fragments) {
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  for (const std::string& fragment : fragments) {
    if (fragment.empty()) continue;
    if (!first) out += ",\n";
    out += fragment;
    first = false;
  }
  return out + "\n],\n\"displayTimeUnit\": \"ms\"}\n";
}

std::string gather_trace_json(comm::Communicator& job, Device& host, const Timeline& mine) {
  const auto fragments = gather_strings(job, host, trace_events_fragment(mine, job.rank()));
  return job.rank() == 0 ? trace_json(fragments) : std::string();
}

void write_trace_file(const std::string& path, const std::string& json) {
  H2_CHECK(!path.empty(), "no trace file path given");
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  H2_CHECK(!ec, "cannot create the folder of trace file '{}': {}", path, ec.message());
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    H2_CHECK(file.is_open(), "cannot open trace file '{}': {}", temporary, std::strerror(errno));
    file.write(json.data(), std::streamsize(json.size()));
    file.flush();
    H2_CHECK(file.good(), "cannot write {} bytes to trace file '{}': {}", json.size(), temporary,
             std::strerror(errno));
  }
  std::filesystem::rename(temporary, target, ec);
  H2_CHECK(!ec, "cannot rename '{}' to trace file '{}': {}", temporary, path, ec.message());
}

}  // namespace h2::parallel::pipeline
