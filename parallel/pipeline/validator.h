// Schedule validator: checks a schedule against the invariants of SCHEDULES.md and returns every
// violation as a human-readable message naming the rank, the index in its list and the action.
//
// Checks, in order (a schedule with malformed actions stops after step 1):
//  1. each action is well formed: its stage exists and lives on the rank that holds it, its
//     micro-batch is in range, a transfer's peer is the adjacent stage in its direction;
//  2. each (stage, micro-batch) has exactly one F and either exactly one B or exactly one I and
//     one W; F comes before the backward, I before W;
//  3. transfers (when the schedule has any): every send has exactly one matching receive (same
//     stage pair, micro-batch and direction) and the reverse; a compute whose producer or consumer
//     stage is on another rank has its RECV before it and its SEND after it;
//  4. replaying every rank with blocking receives (replay.h) finishes: otherwise each stuck rank
//     is reported with its next action and what that action waits for;
//  5. FSDP (when the schedule has UNSHARD or RESHARD): a stage is unsharded whenever it computes,
//     UNSHARD and RESHARD alternate, every stage ends resharded, and at most
//     options.max_active_stages stages per rank are unsharded at once;
//  6. REDUCE_GRAD (when the schedule has any): exactly one per stage, after its last backward.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline/action.h"

namespace h2::parallel::pipeline {

struct ValidateOptions {
  int max_active_stages = 0;  // stages unsharded at once per rank; 0: no bound
};

struct ValidationError {
  int rank = -1;        // -1 when no single rank is at fault
  int index = -1;       // position in the rank's list, -1 when no single action is
  std::string message;  // names the rank, the index and the action
};

struct ValidationReport {
  std::vector<ValidationError> errors;

  bool ok() const { return errors.empty(); }
  // One message per line.
  std::string to_string() const;
};

ValidationReport validate(const Schedule& schedule, const ValidateOptions& options = {});

// Throws h2::Error listing every violation unless the schedule is valid.
void check_valid(const Schedule& schedule, const ValidateOptions& options = {});

}  // namespace h2::parallel::pipeline
