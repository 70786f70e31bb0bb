// Unit: the piece of a model a pipeline stage runs and an FSDP group shards (an embedding, one
// transformer block, a head). forward(input) -> output and backward(grad_output) -> grad_input;
// the unit owns the activations it stashes for backward (freed by backward() or clear();
// take_stash/put_stash move them out and back so a stage can run several micro-batches' forwards
// before their backwards) and ADDS its weight gradients into its Params' f32 grads.
// Shapes: ids (B, T) i32/i64; hidden (B, T, C); logits (B, T, V).
#pragma once

#include <vector>

#include "nn/param.h"
#include "nn/stash.h"

namespace h2::nn {

class Unit {
 public:
  virtual ~Unit() = default;
  virtual Tensor forward(const Tensor& input) = 0;
  // Returns the gradient w.r.t. the input (undefined for a unit whose input is token ids).
  virtual Tensor backward(const Tensor& grad_output) = 0;
  virtual void clear() = 0;  // drop stashed activations without a backward
  // Moves the stashed activations out of the unit or back in (stash.h).
  virtual void transfer_stash(StashTransfer& t) = 0;
  // After forward: the stash leaves the unit, which can run another micro-batch's forward.
  Stash take_stash();
  // Before the matching backward: the stash taken after that micro-batch's forward.
  void put_stash(Stash stash);
  // The Params this unit owns, in export order (a unit that borrows a tied weight owns none).
  virtual void collect(std::vector<Param*>& out) = 0;
  // Split backward (ZB-H1's I and W): while deferred, backward() leaves the weight gradients of
  // the unit's linear layers to weight_backward(), which adds the oldest deferred micro-batch's.
  // Units without such layers compute everything in backward().
  virtual void set_defer_weight_grads(bool) {}
  virtual void weight_backward() {}
  // While frozen, the caller promises that the unit's Param values do not change (the forwards
  // and backwards between two optimizer updates), so the unit may keep what it derives from them
  // across micro-batches (a linear layer's quantized weights); switching either way drops what
  // it kept. Off unless a runtime turns it on (FrozenWeights), so code that writes weights
  // between forwards (loading, finite differences) needs nothing.
  virtual void set_weights_frozen(bool) {}
};

// The scope of that promise: freezes the units' weights for its lifetime and thaws them when it
// ends, by return or by exception.
class FrozenWeights {
 public:
  explicit FrozenWeights(std::vector<Unit*> units);
  ~FrozenWeights();
  FrozenWeights(const FrozenWeights&) = delete;
  FrozenWeights& operator=(const FrozenWeights&) = delete;

 private:
  std::vector<Unit*> units_;
};

// The Params a unit owns, in export order.
std::vector<Param*> params_of(Unit& unit);

}  // namespace h2::nn
