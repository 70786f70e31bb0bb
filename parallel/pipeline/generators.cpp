// The compute orders of GPipe, 1F1B, interleaved 1F1B and ZB-H1 (see generators.h).
#include "parallel/pipeline/generators.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace h2::parallel::pipeline {
namespace {

void check_sizes(const char* name, int ranks, int microbatches) {
  H2_CHECK(ranks >= 1, "{}: ranks = {} must be at least 1", name, ranks);
  H2_CHECK(microbatches >= 1, "{}: microbatches = {} must be at least 1", name, microbatches);
}

void push(std::vector<Action>& list, ActionKind kind, int stage, int microbatch) {
  list.push_back(Action::compute(kind, stage, microbatch));
}

}  // namespace

Schedule gpipe(int ranks, int microbatches) {
  check_sizes("gpipe", ranks, microbatches);
  Schedule s = Schedule::with_shape(ranks, ranks, microbatches);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.per_rank[static_cast<size_t>(r)];
    for (int mb = 0; mb < microbatches; ++mb) push(list, ActionKind::F, r, mb);
    for (int mb = 0; mb < microbatches; ++mb) push(list, ActionKind::B, r, mb);
  }
  return s;
}

Schedule one_f_one_b(int ranks, int microbatches, int lead) {
  check_sizes("1f1b", ranks, microbatches);
  H2_CHECK(lead >= 0, "1f1b: lead = {} must not be negative", lead);
  Schedule s = Schedule::with_shape(ranks, ranks, microbatches);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.per_rank[static_cast<size_t>(r)];
    const int warmup = int(std::min<int64_t>(int64_t(ranks - r - 1) * (1 + lead), microbatches));
    for (int mb = 0; mb < warmup; ++mb) push(list, ActionKind::F, r, mb);
    for (int i = 0; i + warmup < microbatches; ++i) {
      push(list, ActionKind::F, r, warmup + i);
      push(list, ActionKind::B, r, i);
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) push(list, ActionKind::B, r, mb);
  }
  return s;
}

Schedule interleaved_1f1b(int ranks, int chunks, int microbatches) {
  check_sizes("interleaved 1f1b", ranks, microbatches);
  H2_CHECK(chunks >= 2, "interleaved 1f1b: chunks = {} must be at least 2 (use 1f1b for one chunk)",
           chunks);
  H2_CHECK(microbatches % ranks == 0,
           "interleaved 1f1b: microbatches = {} must be divisible by ranks = {} (micro-batches go "
           "through the chunks in groups of one per rank)",
           microbatches, ranks);
  Schedule s = Schedule::with_shape(ranks, ranks * chunks, microbatches);
  const int group = ranks * chunks;
  const int total = microbatches * chunks;  // chunk passes per rank and direction
  // The k-th forward (or backward) of a rank: its chunk and micro-batch (Megatron-LM's order).
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / ranks;
    return forward ? c : chunks - 1 - c;
  };
  auto microbatch_of = [&](int k) { return (k / group) * ranks + k % ranks; };
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.per_rank[static_cast<size_t>(r)];
    auto forward = [&](int k) {
      push(list, ActionKind::F, chunk_of(k, true) * ranks + r, microbatch_of(k));
    };
    auto backward = [&](int k) {
      push(list, ActionKind::B, chunk_of(k, false) * ranks + r, microbatch_of(k));
    };
    const int warmup = std::min(2 * (ranks - r - 1) + (chunks - 1) * ranks, total);
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k + warmup < total; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
  }
  return s;
}

Schedule zb_h1(int ranks, int microbatches) {
  check_sizes("zb-h1", ranks, microbatches);
  Schedule s = Schedule::with_shape(ranks, ranks, microbatches);
  for (int r = 0; r < ranks; ++r) {
    auto& list = s.per_rank[static_cast<size_t>(r)];
    const int warmup = std::min(ranks - r - 1, microbatches);
    const int delay = r;  // W's postponed: at most p - r + r = p micro-batches held
    int next_w = 0;
    for (int mb = 0; mb < warmup; ++mb) push(list, ActionKind::F, r, mb);
    for (int i = 0; i < microbatches; ++i) {
      if (warmup + i < microbatches) push(list, ActionKind::F, r, warmup + i);
      push(list, ActionKind::I, r, i);
      if (i >= delay) push(list, ActionKind::W, r, next_w++);
    }
    while (next_w < microbatches) push(list, ActionKind::W, r, next_w++);
  }
  return s;
}

namespace {
constexpr std::array<std::pair<ScheduleKind, std::string_view>, 4> kKindNames = {{
    {ScheduleKind::kGPipe, "gpipe"},
    {ScheduleKind::k1F1B, "1f1b"},
    {ScheduleKind::kInterleaved1F1B, "interleaved-1f1b"},
    {ScheduleKind::kZBH1, "zb-h1"},
}};
}  // namespace

std::string_view schedule_kind_name(ScheduleKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  H2_THROW(Error, "unknown schedule kind {}", static_cast<int>(kind));
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view name) {
  for (const auto& [k, n] : kKindNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

Schedule generate(ScheduleKind kind, int ranks, int microbatches, int chunks, int lead) {
  H2_CHECK(lead == 0 || kind == ScheduleKind::k1F1B,
           "schedule {} has no lead (only 1f1b runs ranks ahead), got lead = {}",
           schedule_kind_name(kind), lead);
  if (kind == ScheduleKind::kInterleaved1F1B) return interleaved_1f1b(ranks, chunks, microbatches);
  H2_CHECK(chunks == 1, "schedule {} runs one chunk per rank, got chunks = {}",
           schedule_kind_name(kind), chunks);
  switch (kind) {
    case ScheduleKind::kGPipe:
      return gpipe(ranks, microbatches);
    case ScheduleKind::k1F1B:
      return one_f_one_b(ranks, microbatches, lead);
    case ScheduleKind::kZBH1:
      return zb_h1(ranks, microbatches);
    case ScheduleKind::kInterleaved1F1B:
      break;
  }
  H2_THROW(Error, "unknown schedule kind {}", static_cast<int>(kind));
}

}  // namespace h2::parallel::pipeline
