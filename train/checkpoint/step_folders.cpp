// Step folders' names and order (see step_folders.h).
#include "train/checkpoint/step_folders.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <system_error>

#include "train/checkpoint/manifest.h"

namespace h2::checkpoint {
namespace fs = std::filesystem;

std::string step_folder_name(int64_t step) {
  return fmt::format("step_{:06}", step);
}

std::string tmp_step_folder_name(int64_t step) {
  return fmt::format(".tmp_step_{:06}", step);
}

std::optional<int64_t> step_of_folder(std::string_view name) {
  constexpr std::string_view kPrefix = "step_";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return step;
}

std::optional<int64_t> step_of_tmp_folder(std::string_view name) {
  constexpr std::string_view kPrefix = ".tmp_";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  return step_of_folder(name.substr(kPrefix.size()));
}

std::vector<StepFolder> complete_checkpoints(const fs::path& dir) {
  std::vector<StepFolder> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::optional<int64_t> step = step_of_folder(entry.path().filename().string());
    if (step && entry.is_directory(error) && fs::exists(entry.path() / kManifest, error))
      found.push_back({*step, entry.path()});
  }
  std::sort(found.begin(), found.end(),
            [](const StepFolder& a, const StepFolder& b) { return a.step < b.step; });
  return found;
}

}  // namespace h2::checkpoint
