// PlanRuntime: the one way a training step runs, for any plan (parallel/plan.h): one process,
// data parallel, a pipeline of HeteroPP groups with FSDP, or replicas of such a pipeline. The
// trainer asks it for steps and evaluations and never learns which kind of plan it runs.
//
// Inside, three pieces:
//   - the pipeline executor (pipeline/pipeline_runtime.h) runs the lowered schedule of this
//     rank's replica (a one-rank replica runs the same code: one stage, every hand-over local);
//   - with several replicas, a GradientReducer (dp/gradient_reducer.h) sums each unit's
//     gradients over the replicas the moment the executor reports them final, while the
//     backward goes on;
//   - the ModelState (runtime/model_state.h): replicated AdamW or FSDP shards, the global
//     gradient norm, the checkpoint's view.
//
// Losses and gradients are those of the mean over the step's global micro-batches, combined in
// the order one process would (micro-batches in order within a replica, replicas in order), so a
// plan's numbers equal one process accumulating the same micro-batches up to the order of
// floating-point sums, and bit for bit where the order is the same.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "nn/model.h"
#include "optim/adamw.h"
#include "parallel/dp/gradient_reducer.h"
#include "parallel/pipeline/pipeline_runtime.h"
#include "parallel/plan.h"
#include "parallel/runtime/model_state.h"

namespace h2::parallel {

// Micro-batch i of the step's global order (0 .. plan.global_micro_batches() - 1), or batch i
// of an evaluation. Called by every rank of the replica that computes it; cheap, deterministic.
using BatchSource = std::function<pipeline::MicroBatch(int index)>;

class PlanRuntime {
 public:
  // Collective over `job` (plan.world_size() ranks): splits the replica and data-parallel groups,
  // builds the executor (FSDP groups, tied pairs) and the optimizer state. `model` stays owned
  // by the caller; sequences are `seq_len` tokens.
  PlanRuntime(Plan plan, nn::Model& model, comm::Communicator& job, int64_t seq_len,
              optim::AdamwOptions adamw);
  ~PlanRuntime();
  PlanRuntime(const PlanRuntime&) = delete;
  PlanRuntime& operator=(const PlanRuntime&) = delete;

  // One step's forward and backward over the global micro-batches (this rank computes its
  // replica's). Returns their mean loss, the same on every rank; gradients are then final and
  // equal on every replica. The caller zeroes them between steps (state().zero_grad()).
  double train_step(const BatchSource& source);
  // The mean loss over `batches` evaluation batches, batch b computed by replica b mod replicas;
  // the same on every rank.
  double evaluate(const BatchSource& source, int batches);

  ModelState& state() { return *state_; }
  const Plan& plan() const { return plan_; }
  const Plan::Place& place() const { return place_; }
  // The executor of this rank's replica (its observer, stash counts, layout).
  pipeline::PipelineRuntime& executor() { return *executor_; }
  const pipeline::PipelineRuntime& executor() const { return *executor_; }
  comm::Communicator& job() const { return job_; }
  // Gradient buckets summed over the replicas (0 with one replica).
  size_t num_buckets() const { return reducer_ ? reducer_->num_buckets() : 0; }

 private:
  Plan plan_;
  comm::Communicator& job_;
  Device* host_ = nullptr;  // the CPU: where losses are gathered
  Plan::Place place_;
  std::unique_ptr<comm::Communicator> replica_comm_;   // this replica's ranks (several replicas)
  std::unique_ptr<comm::Communicator> replicas_comm_;  // this rank's peers in the other replicas
  std::unique_ptr<pipeline::PipelineRuntime> executor_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ModelState> state_;
};

}  // namespace h2::parallel
