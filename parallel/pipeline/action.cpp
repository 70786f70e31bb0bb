// Action names, their compact text and the Schedule shape checks.
#include "parallel/pipeline/action.h"

#include <fmt/format.h>

#include <array>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

constexpr std::array<std::string_view, kNumActionKinds> kNames = {
    "F",      "B",      "I",       "W",       "SEND_F",     "RECV_F",
    "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};

}  // namespace

std::string_view action_kind_name(ActionKind kind) {
  return kNames.at(static_cast<size_t>(kind));
}

std::optional<ActionKind> parse_action_kind(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ActionKind>(i);
  }
  return std::nullopt;
}

std::string to_string(const Action& a) {
  std::string_view name = action_kind_name(a.kind);
  if (is_stage_wide(a.kind)) return fmt::format("{}{}", name, a.stage);
  if (is_send(a.kind)) return fmt::format("{}{}.{}->{}", name, a.stage, a.microbatch, a.peer);
  if (is_recv(a.kind)) return fmt::format("{}{}.{}<-{}", name, a.stage, a.microbatch, a.peer);
  return fmt::format("{}{}.{}", name, a.stage, a.microbatch);
}

Schedule Schedule::with_shape(int ranks, int stages, int microbatches) {
  H2_CHECK(ranks >= 1, "a schedule needs at least one rank, got ranks = {}", ranks);
  H2_CHECK(stages >= ranks && stages % ranks == 0,
           "stages = {} must be a positive multiple of ranks = {} (stage s runs on rank s % ranks)",
           stages, ranks);
  H2_CHECK(microbatches >= 1, "a schedule needs at least one micro-batch, got microbatches = {}",
           microbatches);
  Schedule s;
  s.ranks = ranks;
  s.stages = stages;
  s.microbatches = microbatches;
  s.stage_rank.resize(static_cast<size_t>(stages));
  for (int i = 0; i < stages; ++i) s.stage_rank[static_cast<size_t>(i)] = i % ranks;
  s.per_rank.resize(static_cast<size_t>(ranks));
  return s;
}

bool Schedule::has_comm() const {
  for (const auto& list : per_rank) {
    for (const Action& a : list) {
      if (is_comm(a.kind)) return true;
    }
  }
  return false;
}

void Schedule::check_shape() const {
  H2_CHECK(ranks >= 1, "schedule ranks = {} must be at least 1", ranks);
  H2_CHECK(stages >= 1, "schedule stages = {} must be at least 1", stages);
  H2_CHECK(microbatches >= 1, "schedule microbatches = {} must be at least 1", microbatches);
  H2_CHECK(stage_rank.size() == static_cast<size_t>(stages),
           "schedule has {} stage -> rank entries for {} stages", stage_rank.size(), stages);
  for (size_t s = 0; s < stage_rank.size(); ++s) {
    H2_CHECK(stage_rank[s] >= 0 && stage_rank[s] < ranks,
             "stage {} is mapped to rank {}, outside [0, {})", s, stage_rank[s], ranks);
  }
  H2_CHECK(per_rank.size() == static_cast<size_t>(ranks),
           "schedule has {} action lists for {} ranks", per_rank.size(), ranks);
}

}  // namespace h2::parallel::pipeline
