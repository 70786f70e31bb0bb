// Linear layers reading one input, their GEMMs fused where they can be (see linear_group.h).
#include "models/layers/linear_group.h"

#include <algorithm>

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

LinearGroup::LinearGroup(std::vector<Param> weights) {
  H2_CHECK(!weights.empty(), "LinearGroup: no weights");
  layers_.reserve(weights.size());
  for (Param& w : weights) layers_.emplace_back(std::move(w));
  std::vector<Param*> params;
  for (Linear& l : layers_) params.push_back(&l.param());
  join_params(params);
}

Tensor LinearGroup::joined_values() const {
  std::vector<Tensor> values;
  for (const Linear& l : layers_) values.push_back(l.param().value);
  return Tensor::joined(values);
}

bool LinearGroup::fused() const {
  return std::none_of(layers_.begin(), layers_.end(),
                      [](const Linear& l) { return l.quantized(); }) &&
         joined_values().defined();
}

void LinearGroup::forward(const Tensor& out, const Tensor& x) {
  H2_CHECK(fused(), "LinearGroup {}: a fused forward, but the layers do not fuse now",
           layers_.front().module());
  ops::matmul({.out = out, .a = x, .b = joined_values(), .trans_b = true});
}

void LinearGroup::forward(std::initializer_list<Tensor> outs, const Tensor& x) {
  H2_CHECK(outs.size() == layers_.size(), "LinearGroup {}: {} outputs for {} layers",
           layers_.front().module(), outs.size(), layers_.size());
  SharedInput shared_x;  // the layers quantize x once between them
  auto out = outs.begin();
  for (Linear& l : layers_) l.forward(*out++, x, &shared_x);
}

void LinearGroup::backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  H2_CHECK(fused(), "LinearGroup {}: a fused backward, but the layers do not fuse now",
           layers_.front().module());
  ops::matmul({.out = dx, .a = dy, .b = joined_values()});
  std::vector<Tensor> grads;
  for (const Linear& l : layers_) grads.push_back(l.param().grad);
  const Tensor grad = Tensor::joined(grads);
  const bool deferred = std::any_of(layers_.begin(), layers_.end(),
                                    [](const Linear& l) { return l.defers_weight_grad(); });
  if (grad.defined() && !deferred) return accumulate_weight_grad(grad, dy, x);
  // Each layer its own block of dy's columns (copied dense by the GEMM that reads it).
  int64_t column = 0;
  for (Linear& l : layers_) {
    const int64_t width = l.param().value.size(0);
    l.backward_weight_only(dy.slice(1, column, column + width), x);
    column += width;
  }
}

void LinearGroup::backward(const Tensor& dx, std::initializer_list<Tensor> dys, const Tensor& x) {
  H2_CHECK(dys.size() == layers_.size(), "LinearGroup {}: {} gradients for {} layers",
           layers_.front().module(), dys.size(), layers_.size());
  SharedInput shared_x;  // and x^T for their weight gradients
  auto dy = dys.begin();
  for (size_t i = 0; i < layers_.size(); ++i)
    layers_[i].backward(dx, *dy++, x, /*accumulate_dx=*/i > 0, &shared_x);
}

void LinearGroup::weight_backward() {
  SharedInput shared_x;  // the layers read the same x
  for (Linear& l : layers_) l.weight_backward(&shared_x);
}

}  // namespace h2::models
