// The training loop: a Llama trained under the plan its config describes (train/config/
// job_plan.h), AdamW with FP32 master weights, warm-up + cosine schedule, gradient accumulation
// over micro-batches, global-norm clipping, periodic evaluation on the held-out split, a progress
// line and JSON-lines metrics, checkpoints and resume. Everything is decided by the config before
// the first step; the run is deterministic for a seed.
//
// The loop does not know which kind of plan it runs: one process, data parallel, a pipeline of
// HeteroPP groups with FSDP, or replicas of one. It hands each step's global micro-batches (in
// the sampler's one global order) to the plan's runtime (parallel/runtime/plan_runtime.h), which
// returns the mean loss with the gradients final on every rank, then clips and steps the
// runtime's optimizer state. Only rank 0 prints and writes metrics; every rank writes its share
// of each checkpoint, which loads into any plan.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/runtime.h"
#include "models/llama.h"
#include "train/config/config.h"

namespace h2::train {

struct TrainSummary {
  int64_t steps = 0;
  int64_t first_step = 0;       // where this run began: the resumed checkpoint's step, else 0
  double final_loss = 0;        // training loss of the last step
  double final_eval_loss = -1;  // -1 when evaluation is off
  double tokens_per_s = 0;      // over the whole run
  int64_t peak_mem_bytes = 0;
  int stopped_by = 0;      // the stop signal that ended the run early (stop_signals.h); 0: none
  std::string checkpoint;  // the checkpoint written when it stopped; empty without checkpoint.dir
};

class Trainer {
 public:
  // Validates the config and its plan against `job` (every rank of the job calls it; a single
  // process passes a communicator of one rank, comm/world/world.h), loads the data and builds the
  // model and the runtime; throws ConfigError before any training work on bad input. `print`
  // receives each progress line (stdout in `h2 train`; rank 0 only). Rank 0 checks its outputs
  // first (metrics and trace files writable, checkpoint.dir a writable folder that it locks for
  // the trainer's lifetime, train/checkpoint/checkpoint_dir.h); a `dry_run` checks them without
  // creating or locking anything, and must not run().
  Trainer(const config::TrainConfig& config, Runtime& runtime,
          std::function<void(const std::string&)> print, comm::Communicator& job,
          bool dry_run = false);
  ~Trainer();
  // Trains from the newest checkpoint (when resuming) to train.steps. `stop_requested`, polled
  // after every step on every rank (all or none must pass it), returns a stop signal or 0: when
  // any rank has one, every rank ends after that step with a checkpoint (train/stop_signals.h).
  TrainSummary run(const std::function<int()>& stop_requested = {});
  // The one-line summary run() prints first: parameters, device, plan, steps, data.
  std::string describe() const;
  // Mean loss over up to train.eval_batches batches of the validation split (shared among the
  // replicas; every rank gets the same value); -1 without a validation split.
  double evaluate();
  models::Llama& model();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The model section of a config as the model's own config struct.
models::LlamaConfig llama_config(const config::ModelConfig& model);

// Model FLOPs of one token's forward and backward: 6 per matmul parameter (every parameter but
// an untied input embedding, which is a lookup) plus causal attention (6 * T * C per layer:
// QK^T and PV over half the pairs, forward and backward).
double training_flops_per_token(const models::LlamaConfig& cfg, int64_t num_parameters);

}  // namespace h2::train
