// Model: what a training runtime needs to know of a model, and nothing more: a list of units it
// can split into pipeline stages, the activations' width and dtype between them, and the weight
// the first and the last unit share when embeddings are tied. models::Llama implements it;
// parallel/ is written against it, so the runtime never names a concrete model.
// Shapes: ids (B, T) into units()[0]; hidden (B, T, C) between units; logits (B, T, V) out of
// the last unit.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "nn/unit.h"

namespace h2::nn {

class Model {
 public:
  virtual ~Model() = default;
  // Units in execution order: [input unit, ..., output unit]. Their collect() lists every
  // trainable Param once, in export order.
  virtual std::vector<Unit*> units() = 0;
  virtual DType dtype() const = 0;  // compute dtype of activations and weights
  virtual Device& device() const = 0;
  virtual int64_t hidden_size() const = 0;  // C
  virtual int64_t vocab_size() const = 0;   // V
  // The Param the first unit owns and the last unit also uses (tied embeddings), or nullptr.
  virtual Param* tied_parameter() = 0;
};

// Every Param of the model once, in export order (the units' order).
std::vector<Param*> parameters_of(Model& model);

}  // namespace h2::nn
