// Plan: how the ranks of a job share one training step. Every run is a plan, and one runtime
// (runtime/plan_runtime.h) executes any plan:
//   - one process:            one stage on a group of one rank;
//   - data parallelism:       that stage replicated on every rank (replicas = ranks);
//   - a pipeline (HeteroPP):  stages on groups of ranks, groups of different sizes and chips,
//                             FSDP inside each group (ZeroPP), any schedule;
//   - pipelines replicated:   replicas of such a pipeline, each on its own micro-batches.
//
// Rank layout, replica-major: a replica is `ranks_per_replica()` consecutive ranks; inside it,
// schedule position q (a group) is the ranks after those of positions < q. A group of g ranks
// splits every micro-batch's rows evenly (rank k of g takes rows [M k / g, M (k + 1) / g)).
// Stage s runs the model units layout.begin(s) .. layout.end(s) - 1 on position s mod
// positions() (interleaved schedules give a position `chunks` stages).
//
// A step is micro_batches micro-batches of micro_batch_rows sequences per replica; replica r takes
// micro-batches r * micro_batches .. (r + 1) * micro_batches - 1 of the step's global order, and
// the gradients are those of the mean loss over all of them, so every plan of a model trains the
// same numbers up to the order of floating-point sums.
//
// Plans come from a config (train/config/job_plan.h: parallel.mode, parallel.* keys, a plan
// file) and, later, from the planner; check() refuses an inconsistent one before any work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/stage_layout.h"

namespace h2::parallel {

struct Plan {
  std::vector<int> group_sizes;      // ranks of one replica's schedule positions, in pipeline order
  std::vector<std::string> devices;  // the device spec each job rank drives ("vchip:chip-a")
  int replicas = 1;
  pipeline::StageLayout layout;  // groups.size() * chunks stages -> model units
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::k1F1B;
  int chunks = 1;         // stages per position (interleaved-1f1b)
  int lead = 0;           // 1f1b: micro-batches each position runs ahead of the next (generators.h)
  int micro_batches = 1;  // per replica and step
  int64_t micro_batch_rows = 1;     // sequences per micro-batch
  bool fsdp = false;                // shard each unit's parameters over its group
  int gather_group = 0;             // FSDP: gather once per this many micro-batches (0: per step)
  std::optional<DType> wire_dtype;  // activations between ranks; nullopt: the compute dtype
  bool recompute = false;           // blocks recompute their activations in backward
  size_t bucket_bytes = 25u << 20;  // replicas' gradient all-reduce buckets
  bool overlap = true;       // transfers run behind compute; false: each send blocks until sent
  size_t segment_bytes = 0;  // wire bytes per segment of a transfer; 0: one message per piece
  std::string source;        // where the plan came from, for messages ("parallel.mode dp (--set)")

  int positions() const { return int(group_sizes.size()); }
  int stages() const { return layout.stages(); }
  int ranks_per_replica() const;
  int world_size() const { return replicas * ranks_per_replica(); }
  int global_micro_batches() const { return replicas * micro_batches; }

  // Where a job rank sits, and the inverse.
  struct Place {
    int replica = 0, position = 0, group_rank = 0;
  };
  Place place_of(int rank) const;
  int rank_at(const Place& place) const;
  // Whether job rank `rank` runs model unit `unit` (0 the embedding, then the blocks, the head):
  // its position holds a stage (stage s at position s mod positions) that covers the unit.
  bool holds_unit(int rank, int unit) const;

  // Refuses, with ConfigError naming `source` and the values, what no runtime can execute:
  // counts below 1, a layout of other than positions * chunks stages, a schedule whose shape
  // rules fail (chunks only for interleaved-1f1b, whose micro-batches divide by the positions),
  // rows that a group cannot split evenly, a device list of another length than the ranks.
  void check() const;
  // One replica's schedule: generated, lowered (transfers, FSDP gathers and frees, gradient
  // reductions) and validated.
  pipeline::Schedule lowered_schedule() const;
  // One line for logs: "2 stages (embedding+blocks 0-2 | block 3+head) on groups of 2+2 ranks,
  // 1f1b, 4 micro-batches of 4 rows, fsdp"; "1 stage x 2 replicas (data parallel), ...".
  std::string str() const;
};

}  // namespace h2::parallel
