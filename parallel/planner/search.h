// HeteroAuto's plan search, two levels as in H2's paper:
//   outer: which chip types take part (each wholly or not at all), their order along the
//          pipeline, each type's stage count and group size, the replicas, the micro-batch size
//          (and so the count, for a fixed global batch), the schedule, FSDP, recompute and the
//          wire dtype;
//   inner: an exact dynamic program over the split of the layers between the stages, under each
//          chip's memory, minimising the pipeline's step-time surrogate
//              f = sum_q c_q + (m - 1) max_q c_q
//          (c_q: stage q's compute and staging per micro-batch; the 1F1B/GPipe makespan when one
//          stage dominates). Its states keep the Pareto front of (max, sum).
// Every surviving candidate is then costed by the full cost model (cost_model.h: the simulated
// schedule, collectives, optimizer, memory) and the candidates ranked by predicted step time,
// ties broken by their description, so the same inputs give the same plans. Candidates that do
// not fit their chips' memory are counted and kept aside to explain what memory ruled out.
// Small split problems (at most 16 splits) are costed split by split, so that a small search
// is exact under the cost model.
//
// At scale (1,024 chips and more) the outer level is a branch and bound: outer candidates are
// grouped into classes (chip types used, replicas, group sizes, micro-batch rows), each with a
// lower bound of its members' step time from the profiles alone; classes are expanded in the
// order of their bounds, a batch of 8 at a time over the machine's cores, until the next bound
// exceeds the step time of the keep-th best plan found. The result is the same as expanding
// every class.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/planner/cost_model.h"

namespace h2::parallel::planner {

struct SearchSpace {
  int64_t global_rows = 0;  // sequences per optimizer step (all replicas together)
  std::vector<pipeline::ScheduleKind> schedules = {
      pipeline::ScheduleKind::k1F1B, pipeline::ScheduleKind::kZBH1, pipeline::ScheduleKind::kGPipe,
      pipeline::ScheduleKind::kInterleaved1F1B};
  std::vector<std::optional<DType>> wires = {std::nullopt, DType::bf16};
  // 1f1b with several positions: micro-batches each runs ahead of the next (Plan::lead), to hide
  // slow links' round trips behind compute at the cost of stashed activations.
  std::vector<int> leads = {0, 1, 2};
  bool fsdp = true;                  // try FSDP inside groups of several chips
  bool recompute = true;             // try recomputation where a plan does not fit without it
  int64_t max_micro_batch_rows = 0;  // 0: global_rows
  int max_stages = 0;                // 0: the model's layers
  int threads = 0;                   // 0: every core
  int keep = 10;                     // candidates returned
  int64_t max_classes = 0;           // stop after expanding this many classes (0: never)
};

struct Candidate {
  Plan plan;
  PlanEstimate estimate;
  double tokens_per_s = 0;
};

struct SearchResult {
  std::vector<Candidate> best;       // fitting candidates, fastest first
  std::vector<Candidate> too_large;  // the fastest few that did not fit, with their problem
  int64_t classes = 0;               // chip sets x replicas x group sizes x micro-batch sizes
  int64_t classes_expanded = 0;      // those whose lower bound could still beat the best found
  int64_t outer_candidates = 0;      // outer configurations examined in them
  int64_t costed = 0;                // plans run through the full cost model
  int64_t memory_pruned = 0;         // classes and outer configurations no layer split fits
  double seconds = 0;                // wall time of the search
  // False when the class budget stopped the search; optimality_gap then says by how much the
  // best plan's step time can exceed the optimum's at most (best / least bound of the classes
  // not expanded - 1; infinite when no plan was found before the budget ran out).
  bool complete = true;
  double optimality_gap = 0;
};

SearchResult search(const Cluster& cluster, const CostInputs& inputs, const SearchSpace& space);

// Why `other` is slower than `best`: the largest differences among bottleneck chip, bubble,
// communication, optimizer tail, memory-forced recompute and chips used, in words.
std::string explain(const Candidate& best, const Candidate& other, const CostInputs& inputs);

// The inner level, exposed for tests: the layer split of positions whose per-block cost, fixed
// cost (embedding, head, staging) and memory limit are given.
struct SplitProblem {
  int layers = 0;
  int64_t micro_batches = 1;
  std::vector<double> block_s;  // per position: one block's compute per micro-batch
  std::vector<double> fixed_s;  // per position: embedding/head/staging per micro-batch
  std::vector<int> max_blocks;  // per position: most blocks its memory holds
};
// Blocks per position minimising sum c + (m - 1) max c with c_q = fixed_q + b_q block_q, every
// 1 <= b_q <= max_blocks[q] and the b_q adding up to the layers; nullopt when no split fits.
std::optional<std::vector<int>> split_layers(const SplitProblem& problem);

// Every split that fits (as above), or nullopt when there are more than `limit`: small problems
// are searched exhaustively under the full cost model instead of the surrogate.
std::optional<std::vector<std::vector<int>>> all_splits(const SplitProblem& problem, int64_t limit);

}  // namespace h2::parallel::planner
