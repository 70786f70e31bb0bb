// Metrics lines carry the CLI.md fields, are readable JSON after every step (flushed as written),
// every record says its event, time, attempt and integer step, a resumed log counts its attempts,
// and the progress line shows the same figures.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/metrics/metrics_log.h"

namespace h2::train {
namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// TMPDIR/folder/metrics.jsonl, with nothing left in folder from an earlier run.
std::string fresh_log_path(const std::string& folder) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / folder;
  std::filesystem::remove_all(dir);
  return (dir / "metrics.jsonl").string();
}

TEST(MetricsLog, WritesFlushedJsonLinesWithTheContractFields) {
  const std::string path = fresh_log_path("h2_metrics_test/run");
  MetricsLog log(path);
  StepMetrics m{.step = 10,
                .total_steps = 300,
                .loss = 2.5,
                .lr = 1e-3,
                .tokens_per_s = 18000,
                .step_ms = 56.9,
                .mfu = 0.31,
                .mem_bytes = 43 << 20,
                .grad_norm = 0.8};
  log.write_step(m);
  auto lines = read_lines(path);  // readable before the log is closed: nothing buffered
  ASSERT_EQ(lines.size(), 1u);
  for (const char* key : {"step", "loss", "lr", "tokens_per_s", "step_ms", "mfu", "mem_bytes"})
    EXPECT_TRUE(lines[0].contains(key)) << key;
  EXPECT_FALSE(lines[0].contains("eval_loss"));
  m.step = 20;
  m.eval_loss = 2.7;
  log.write_step(m);
  log.write_event("done", 20, {{"steps", 20}, {"final_loss", 2.5}});
  lines = read_lines(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["eval_loss"], 2.7);
  EXPECT_EQ(lines[2]["event"], "done");
  EXPECT_EQ(lines[2]["steps"], 20);
  for (const auto& line : lines) {
    EXPECT_TRUE(line["step"].is_number_integer()) << line;
    EXPECT_EQ(line["attempt"], 0) << line;
    // "2026-12-04T09:30:12.345Z"
    const std::string time = line["time"];
    ASSERT_EQ(time.size(), 24u) << time;
    EXPECT_EQ(time[10], 'T');
    EXPECT_EQ(time.back(), 'Z');
  }
  EXPECT_EQ(lines[0]["event"], "step");
}

TEST(MetricsLog, AResumedLogCountsItsAttemptsFromTheStartRecords) {
  const std::string path = fresh_log_path("h2_metrics_attempts");
  {
    MetricsLog first(path);
    first.write_event("start", 0);
    first.write_step(StepMetrics{.step = 1});
  }
  for (int attempt = 1; attempt <= 2; ++attempt) {
    MetricsLog resumed(path, /*append=*/true);
    EXPECT_EQ(resumed.attempt(), attempt);
    resumed.write_event("start", 1);
    resumed.write_event("resume", 1, {{"checkpoint", "ckpt/step_000001"}});
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[5]["attempt"], 2);
  EXPECT_EQ(lines[5]["event"], "resume");
  EXPECT_EQ(lines[5]["checkpoint"], "ckpt/step_000001");
  EXPECT_EQ(MetricsLog(path, true).attempt(), 3);
}

// A line torn by a crash or a full disk (no newline at its end) stays alone: the resumed run's
// start record is not appended to it, so line-by-line readers still find it.
TEST(MetricsLog, AResumeAfterATornLineStartsOnALineOfItsOwn) {
  const std::string path = fresh_log_path("h2_metrics_torn");
  {
    MetricsLog first(path);
    first.write_event("start", 0);
  }
  std::ofstream(path, std::ios::app) << R"({"step":3,"loss":2.5)";  // torn mid-record
  {
    MetricsLog resumed(path, /*append=*/true);
    resumed.write_event("start", 2);
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], R"({"step":3,"loss":2.5)");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["event"], "start");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["attempt"], 1);
}

TEST(MetricsLog, ProgressLineShowsTheFigures) {
  StepMetrics m{.step = 40,
                .total_steps = 300,
                .loss = 2.4512,
                .lr = 2.9e-3,
                .tokens_per_s = 18230,
                .mfu = 0.312,
                .mem_bytes = int64_t(41.2 * (1 << 20))};
  std::string line = progress_line(m, 72);
  EXPECT_NE(line.find("step  40/300"), std::string::npos) << line;
  EXPECT_NE(line.find("loss 2.4512"), std::string::npos) << line;
  EXPECT_NE(line.find("18230 tok/s"), std::string::npos) << line;
  EXPECT_NE(line.find("mfu  31.2%"), std::string::npos) << line;
  EXPECT_NE(line.find("mem 41.2 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("eta 1m12s"), std::string::npos) << line;
}

TEST(MetricsLog, UnwritablePathIsAConfigError) {
  EXPECT_THROW(MetricsLog("/proc/h2-cannot-write/metrics.jsonl"), ConfigError);
}

}  // namespace
}  // namespace h2::train
