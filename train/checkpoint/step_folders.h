// The names of a checkpoint folder's step folders and their order. DIR/step_NNNNNN holds the
// checkpoint of step N (at least six digits: step_1000000 follows step_999999), written first as
// DIR/.tmp_step_NNNNNN. Folders are ordered by the step their name stands for, never by the name
// itself, under which "step_1000000" would sort before "step_999999".
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h2::checkpoint {

std::string step_folder_name(int64_t step);      // "step_000042"
std::string tmp_step_folder_name(int64_t step);  // ".tmp_step_000042"

// The step a folder name stands for: "step_" then decimal digits only (a step that fits in
// int64_t); nullopt for any other name, which is then no checkpoint of H2's.
std::optional<int64_t> step_of_folder(std::string_view name);
// The same for a save's temporary folder (".tmp_step_N"), and the step folder it becomes.
std::optional<int64_t> step_of_tmp_folder(std::string_view name);

struct StepFolder {
  int64_t step = 0;
  std::filesystem::path path;
};

// The complete checkpoints in `dir` (step folders with a manifest), oldest step first; none when
// `dir` cannot be read.
std::vector<StepFolder> complete_checkpoints(const std::filesystem::path& dir);

}  // namespace h2::checkpoint
