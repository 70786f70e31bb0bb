// JSON-lines metrics and the progress line (see metrics_log.h).
#include "train/metrics/metrics_log.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>

#include "core/error.h"

namespace h2::train {
namespace {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = int64_t(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

// "2026-12-04T09:30:12.345Z".
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03}Z", text, millis);
}

// Whether the file at `path` exists and its last byte is not a newline: a line torn by a crash
// or a full disk, which the next record must not be appended to.
bool ends_mid_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() <= 0) return false;
  in.seekg(-1, std::ios::end);
  return in.get() != '\n';
}

// Start records already in a metrics file: the attempt number of the run about to append.
int count_starts(const std::string& path) {
  std::ifstream in(path);
  int starts = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(R"("event":"start")") != std::string::npos) ++starts;
  return starts;
}

}  // namespace

nlohmann::json to_json(const StepMetrics& m) {
  nlohmann::json j = {{"step", m.step},
                      {"loss", m.loss},
                      {"lr", m.lr},
                      {"tokens_per_s", m.tokens_per_s},
                      {"step_ms", m.step_ms},
                      {"mfu", m.mfu},
                      {"mem_bytes", m.mem_bytes},
                      {"grad_norm", m.grad_norm}};
  if (m.eval_loss) j["eval_loss"] = *m.eval_loss;
  j.update(m.extra);
  return j;
}

std::string progress_line(const StepMetrics& m, double eta_seconds) {
  int width = int(fmt::format("{}", m.total_steps).size());
  std::string line = fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.2e} | {:>9.0f} tok/s | mfu {:5.1f}% | mem {} | eta {}",
      m.step, width, m.total_steps, m.loss, m.lr, m.tokens_per_s, 100 * m.mfu,
      human_bytes(m.mem_bytes), human_duration(eta_seconds));
  if (m.eval_loss) line += fmt::format(" | eval {:.4f}", *m.eval_loss);
  if (!m.extra_progress.empty()) line += " | " + m.extra_progress;
  return line;
}

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  std::filesystem::path p(path);
  std::error_code error;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), error);
  if (append) attempt_ = count_starts(path);
  const bool torn = append && ends_mid_line(path);
  file_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!file_)
    H2_THROW(ConfigError, "log.metrics_file: cannot open '{}' for writing{}", path,
             error ? ": " + error.message() : "");
  if (torn) file_ << '\n';  // the torn line stays alone, and this run's records whole
}

void MetricsLog::write(const nlohmann::json& line) {
  if (!file_.is_open()) return;
  file_ << line.dump() << '\n';
  file_.flush();  // one line at a time: a crash keeps every step logged so far
  H2_CHECK(file_.good(), "writing metrics to '{}' failed (disk full?)", path_);
}

void MetricsLog::write_step(const StepMetrics& m) {
  write_event("step", m.step, to_json(m));
}

void MetricsLog::write_event(std::string_view event, int64_t step, const nlohmann::json& fields) {
  if (!file_.is_open()) return;
  nlohmann::json line = {
      {"event", event}, {"time", utc_now()}, {"attempt", attempt_}, {"step", step}};
  for (const auto& [key, value] : fields.items())
    if (key != "step") line[key] = value;
  write(line);
}

}  // namespace h2::train
