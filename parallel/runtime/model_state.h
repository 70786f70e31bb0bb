// ModelState: what one rank trains of the model, whatever the plan. It owns the optimizer state
// of the parameters the rank updates (FP32 masters and AdamW moments: whole tensors when its
// group replicates them, FSDP shards otherwise), computes the job's global gradient norm, steps,
// and gives the checkpoint its view: which rows of which whole tensors this rank writes, and how
// to load them back whatever plan wrote them.
//
// Ownership: in every replica, one rank per parameter counts it (rank 0 of the group whose
// stages hold it; a tied table: the first stage's). The gradient norm adds each parameter's sum
// of squares from replica 0's counting rank, in the model's parameter order, exactly as one
// process would (so every plan gives the same bits for the same gradients); checkpoints split
// each tensor's rows between the replicas' counting ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/param.h"
#include "optim/adamw.h"
#include "parallel/fsdp/flat_param.h"

namespace h2::parallel {

enum class StateKind { master, m, v };  // an FP32 master weight, AdamW's first, second moment

// One parameter's whole tensors (f32, any device; views, not copies) and the rows this rank
// writes: share `share` of `shares` even splits of dim 0 (shares == 0: none).
struct StatePiece {
  std::string name;
  Tensor master, m, v;
  int share = 0, shares = 0;
};

// Where load() reads from (a checkpoint folder; train/ adapts its reader).
class StateReader {
 public:
  virtual ~StateReader() = default;
  // False for a checkpoint without optimizer state (h2 import): the moments start at zero.
  virtual bool has_moments() const = 0;
  // Fills `into` (f32, the parameter's whole shape) with the stored tensor; throws naming the
  // file when it is missing or of another shape.
  virtual void read(StateKind kind, const std::string& name, Tensor& into) = 0;
};

// The ranks that count a parameter and where this rank sits among the replicas.
struct StateOwnership {
  comm::Communicator* job = nullptr;  // every rank of the plan
  Device* host = nullptr;             // the CPU: where norms and checkpoint pieces are gathered
  int replica = 0, replicas = 1;
  // Whether this rank counts the named parameter in its replica.
  std::function<bool(const std::string& name)> counts;
};

class ModelState {
 public:
  virtual ~ModelState() = default;
  // Replicated parameters (`params`, in the model's order): AdamW on whole tensors.
  static std::unique_ptr<ModelState> replicated(std::vector<nn::Param*> params,
                                                std::vector<std::string> model_order,
                                                optim::AdamwOptions options,
                                                StateOwnership ownership);
  // FSDP units (in unit order): AdamW on this rank's shards.
  static std::unique_ptr<ModelState> sharded(std::vector<fsdp::FlatParamGroup*> units,
                                             optim::AdamwOptions options, StateOwnership ownership);

  virtual void zero_grad() = 0;
  // The global gradient norm (collective over the job; every rank gets the same bits).
  virtual double grad_norm() = 0;
  // One AdamW update at `lr` with gradients scaled by `grad_scale` (clipping).
  virtual void step(double lr, double grad_scale) = 0;
  // The checkpoint's view (collective over the job: FSDP groups gather their shards).
  virtual std::vector<StatePiece> pieces() = 0;
  // Loads masters (and moments when the reader has them), then continues at `steps`.
  virtual void load(StateReader& reader, int64_t steps) = 0;
};

}  // namespace h2::parallel
