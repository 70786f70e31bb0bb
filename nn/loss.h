// The training loss of a language model: cross-entropy of logits against next-token targets,
// with -100 ignored, as a sum and a count so that callers can combine partial batches exactly.
// Shapes: logits (N, V) compute dtype; targets (N) i32/i64; dlogits (N, V) like logits.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace h2::nn {

struct LossSum {
  double sum = 0;     // of the per-row losses
  int64_t count = 0;  // rows whose target is not ignored
};

// The loss sum over the rows and, when `dlogits` is defined, dlogits = d(scale * sum / count) /
// dlogits (zero where the target is ignored).
LossSum cross_entropy_loss(const Tensor& logits, const Tensor& targets, const Tensor& dlogits,
                           float scale);

// The mean loss of a LossSum as one process reports it: float(sum / count), 0 when empty.
float mean_loss(const LossSum& loss);

}  // namespace h2::nn
