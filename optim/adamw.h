// AdamW over a model's parameters with FP32 master weights. For each parameter the optimizer keeps
// an FP32 master copy (or uses the parameter itself when it is already f32), and FP32 first and
// second moments, on the parameter's device. A step reads the FP32 gradients, optionally scales
// them (global-norm clipping), updates the master and writes the compute copy in its own dtype.
// Weight decay applies to matrices only (rank >= 2), not to norm gains, as in GPT-2/Llama recipes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace h2::optim {

// One trainable tensor: its compute copy (f32 or bf16) and its gradient (f32, same shape).
struct ParamRef {
  std::string name;
  Tensor param;
  Tensor grad;
};

struct AdamwOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(std::vector<ParamRef> params, AdamwOptions options);

  // sqrt(sum of squares of every gradient), accumulated in double across parameters.
  double grad_norm() const;
  // Each parameter's sum of squared gradient elements (f32 reduction, as grad_norm sums them),
  // for a norm whose parameters live on several ranks.
  std::vector<double> grad_sum_squares() const;
  // One update at rate `lr`; gradients are multiplied by grad_scale first (1: no clipping).
  void step(double lr, double grad_scale = 1.0);
  // Sets every gradient to zero (before accumulating the next step's micro-batches).
  void zero_grad();
  int64_t steps_taken() const { return step_; }
  // After loading state from a checkpoint: steps already taken (bias correction continues).
  void restore_steps(int64_t steps) { step_ = steps; }
  // After loading masters from a checkpoint: rewrites each compute copy from its master.
  void sync_params_from_masters();
  // The optimizer's per-parameter state, for checkpoints: master (f32), m, v.
  struct State {
    Tensor master, m, v;
  };
  const std::vector<State>& state() const { return state_; }
  std::vector<State>& state() { return state_; }
  const std::vector<ParamRef>& params() const { return params_; }

 private:
  std::vector<ParamRef> params_;
  std::vector<State> state_;
  AdamwOptions options_;
  int64_t step_ = 0;
};

// The factor that scales gradients of global norm `norm` down to at most `max_norm`
// (1 when max_norm <= 0 or the norm is already within it).
double clip_scale(double norm, double max_norm);

}  // namespace h2::optim
