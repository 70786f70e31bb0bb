// Cross-entropy over logits (see loss.h).
#include "nn/loss.h"

#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::nn {

LossSum cross_entropy_loss(const Tensor& logits, const Tensor& targets, const Tensor& dlogits,
                           float scale) {
  const int64_t N = logits.size(0);
  Device& dev = logits.device();
  Tensor t = targets.view({N});
  Tensor losses = Tensor::empty({N}, DType::f32, dev);
  Tensor lse = Tensor::empty({N}, DType::f32, dev);
  ops::cross_entropy_fwd({.losses = losses, .lse = lse, .logits = logits, .targets = t});
  Tensor total = Tensor::empty({1}, DType::f32, dev);
  ops::sum({.out = total, .in = losses});
  LossSum r;
  r.sum = tensor_to_floats(total)[0];
  for (int64_t id : tensor_to_ints(t)) r.count += id != -100;
  if (dlogits.defined()) {
    const float dloss = r.count > 0 ? scale / float(r.count) : 0.0f;
    ops::cross_entropy_bwd(
        {.dlogits = dlogits, .logits = logits, .lse = lse, .targets = t, .dloss = dloss});
  }
  return r;
}

float mean_loss(const LossSum& loss) {
  return loss.count > 0 ? float(loss.sum / double(loss.count)) : 0.0f;
}

}  // namespace h2::nn
