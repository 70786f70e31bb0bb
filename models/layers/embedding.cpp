// Embedding forward/backward on embedding_fwd/bwd. A non-f32 dout is converted to f32 first, so
// the scatter accumulates in f32 straight into the grad.
#include "models/layers/embedding.h"

#include "core/error.h"
#include "core/ops.h"

namespace h2::models {

Embedding::Embedding(std::string name, int64_t vocab, int64_t dim, uint64_t seed, DType dtype,
                     Device& device)
    : table_(make_param(std::move(name), {vocab, dim}, Init::normal, 0.02f, seed, dtype, device)) {}

Tensor Embedding::forward(const Tensor& ids) {
  Shape shape = ids.shape();
  shape.push_back(table_.value.size(1));
  Tensor out = Tensor::empty(shape, table_.value.dtype(), table_.value.device());
  ops::embedding_fwd({.out = out, .table = table_.value, .ids = ids});
  ids_ = ids;
  return out;
}

void Embedding::backward(const Tensor& dout) {
  if (!ids_.defined()) throw Error("Embedding " + table_.name + ": backward without forward");
  Tensor d = dout;
  if (dout.dtype() != table_.grad.dtype()) {
    d = Tensor::empty(dout.shape(), table_.grad.dtype(), dout.device());
    ops::copy({.out = d, .in = dout});
  }
  ops::embedding_bwd({.dtable = table_.grad, .dout = d, .ids = ids_});
  clear();
}

}  // namespace h2::models
