// The plan (parallel/plan.h) a training config describes for a job of N ranks, resolved once at
// start: every mode is a plan, so nothing after this point asks which mode it runs.
//   single    one stage on one rank (the job must have one rank);
//   dp        that stage replicated on every rank, gradients summed in buckets of
//             parallel.bucket_mb while backward runs;
//   pipeline  stage groups of parallel.stage_ranks ranks (one each when empty) running
//             parallel.stage_layers blocks (even when empty) under parallel.schedule, with
//             parallel.fsdp, parallel.gather_group and parallel.wire_dtype.
// single and dp run 1F1B on their one stage: each micro-batch's forward, then its backward.
// Devices come from cluster.devices (one per rank) or train.device; a plan file
// (parallel.plan) has already been written into those keys (plan.h).
#pragma once

#include "core/device.h"
#include "parallel/plan.h"
#include "train/config/config.h"

namespace h2::config {

// ConfigError naming the keys, their values and origins when the config does not describe a
// plan for `world_size` ranks.
parallel::Plan plan_from_config(const TrainConfig& config, int world_size);

// Refuses, before the model exists, a plan whose stages on `rank` would not fit `device`: the
// plan file's predicted peak for the rank's stage group where h2 plan wrote one (HeteroAuto's
// memory model), else the estimated peak (estimate_stage_memory, with the schedule's peak of
// micro-batches in flight) of the rank's stages, against the device's memory. ConfigError with
// both figures and the way out.
void check_plan_memory(const parallel::Plan& plan, const TrainConfig& config, int rank,
                       const Device& device);

}  // namespace h2::config
