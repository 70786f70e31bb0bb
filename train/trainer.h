// The training loop: a Llama on one device per rank, AdamW with FP32 master weights, warm-up +
// cosine schedule, gradient accumulation over micro-batches, global-norm clipping, periodic
// evaluation on the held-out split, a progress line and JSON-lines metrics, checkpoints and
// resume. Everything is decided by the config before the first step; the run is deterministic
// for a seed.
//
// Data parallelism (parallel.mode dp, a `group` of W ranks): every rank holds the whole model.
// A step's global batch is W * grad_accum micro-batches, drawn in one global order; rank r takes
// micro-batches r * grad_accum .. (r + 1) * grad_accum - 1 of it. Gradients are summed over the
// group in buckets while the last micro-batch's backward runs (parallel/dp/gradient_reducer.h),
// so every rank steps identically, and the run matches one process with W * grad_accum
// micro-batches up to the order of floating-point sums. Only rank 0 prints and writes metrics;
// checkpoints are written by every rank (its rows of each tensor) and read back at any W.
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "core/runtime.h"
#include "models/llama.h"
#include "train/config/config.h"
#include "train/data/dataset.h"
#include "train/metrics/metrics_log.h"

namespace h2::train {

struct TrainSummary {
  int64_t steps = 0;
  double final_loss = 0;        // training loss of the last step
  double final_eval_loss = -1;  // -1 when evaluation is off
  double tokens_per_s = 0;      // over the whole run
  int64_t peak_mem_bytes = 0;
};

class Trainer {
 public:
  // Validates the config, loads the data and builds the model; throws ConfigError before any
  // training work on bad input. `print` receives each progress line (stdout in `h2 train`; rank
  // 0 only). `group`: the data-parallel ranks (nullptr: a single process).
  Trainer(const config::TrainConfig& config, Runtime& runtime,
          std::function<void(const std::string&)> print, comm::Communicator* group = nullptr);
  ~Trainer();
  TrainSummary run();
  // Mean loss over up to train.eval_batches batches of the validation split (shared among the
  // ranks; every rank gets the same value).
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
