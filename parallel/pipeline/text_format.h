// Text form of a schedule, to print, diff and load by hand. Grammar (one item per line; blank
// lines and lines starting with '#' are ignored; tokens are separated by blanks):
//
//   pipeline ranks=P stages=S microbatches=M [stage_ranks=R0,R1,...]   (header, first)
//   rank 0: ACTION ACTION ...                                          (P lines, ranks in order)
//
//   ACTION := KIND STAGE '.' MB                 KIND in F B I W           e.g. F0.3
//           | SEND_F|SEND_B STAGE '.' MB '->' PEER                        e.g. SEND_F0.3->1
//           | RECV_F|RECV_B STAGE '.' MB '<-' PEER                        e.g. RECV_B0.3<-1
//           | UNSHARD|RESHARD|REDUCE_GRAD STAGE                           e.g. UNSHARD0
//
// Without stage_ranks, stage s runs on rank s % P. format_schedule always writes stage_ranks,
// and parse_schedule(format_schedule(s)) == s. Parsing checks syntax and shape only; run the
// validator for the schedule's invariants.
#pragma once

#include <string>
#include <string_view>

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

std::string format_schedule(const Schedule& schedule);

// Throws h2::ConfigError naming the line (1-based), the token and what is wrong.
Schedule parse_schedule(std::string_view text);

// One token (see the grammar); throws h2::ConfigError naming the token.
Action parse_action(std::string_view token);

}  // namespace h2::parallel::pipeline
