// Param: one named trainable tensor and its gradient, the unit of everything that trains,
// shards or checkpoints a model. Invariants: `value` has the compute dtype and `grad` is f32 with
// the same shape; backward passes ADD into `grad` (gradient accumulation over micro-batches) and
// only an explicit zeroing clears it. FSDP may rebind both tensors to views of flat buffers, so
// holders keep a Param* (never a copy) while a run lasts.
#pragma once

#include <string>

#include "core/tensor.h"

namespace h2::nn {

struct Param {
  std::string name;  // the exported name, e.g. Hugging Face's "model.norm.weight"
  Tensor value;      // compute dtype
  Tensor grad;       // f32, same shape
};

}  // namespace h2::nn
