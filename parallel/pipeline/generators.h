// Schedule generators: the compute actions (F, B, I, W) of the classic pipeline schedules, one
// ordered list per rank. Lower them with lowering.h before running them.
//
//   GPipe            every forward, then every backward (micro-batch order). Peak stash m.
//   1F1B             p - r - 1 warm-up forwards on rank r, then one forward / one backward
//                    alternately, then the remaining backwards. Peak stash min(p - r, m).
//                    With a lead of k, (p - r - 1)(1 + k) warm-up forwards: each rank runs k
//                    micro-batches further ahead of the next, so that a transfer's round trip
//                    to it (activation out, gradient back) overlaps k forward-backward pairs of
//                    compute instead of stalling both (peak stash min((p - r - 1)(1 + k) + 1, m)).
//   interleaved 1F1B v model chunks per rank (stage c*p + r on rank r); micro-batches go
//                    through the chunks in groups of p (Megatron-LM's order), with
//                    2(p - r - 1) + (v - 1)p warm-up forwards. Needs m divisible by p.
//   ZB-H1            1F1B's order with each B split into I (input gradient, on the critical
//                    path) and W (weight gradient); rank r postpones its W's by r micro-batches,
//                    filling the cool-down bubble, so that at most p micro-batches are held on
//                    any rank (1F1B's peak). Bubble (p - 1)(F + I - W).
#pragma once

#include <optional>
#include <string_view>

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

Schedule gpipe(int ranks, int microbatches);
Schedule one_f_one_b(int ranks, int microbatches, int lead = 0);
Schedule interleaved_1f1b(int ranks, int chunks, int microbatches);
Schedule zb_h1(int ranks, int microbatches);

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved1F1B, kZBH1 };

// Names as a config file spells them: gpipe, 1f1b, interleaved-1f1b, zb-h1.
std::string_view schedule_kind_name(ScheduleKind kind);
std::optional<ScheduleKind> parse_schedule_kind(std::string_view name);

// One entry point for configs; `chunks` is used by the interleaved schedule only (others
// require chunks == 1), `lead` by 1F1B only (others require lead == 0).
Schedule generate(ScheduleKind kind, int ranks, int microbatches, int chunks = 1, int lead = 0);

}  // namespace h2::parallel::pipeline
