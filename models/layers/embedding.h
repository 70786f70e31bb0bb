// Token embedding: out[n] = table[ids[n]]. The table is also the LM head's weight when embeddings
// are tied (the head then shares this Param, and both uses add into the one f32 grad).
#pragma once

#include <string>

#include "models/layers/param.h"

namespace h2::models {

class Embedding {
 public:
  Embedding(std::string name, int64_t vocab, int64_t dim, uint64_t seed, DType dtype,
            Device& device);

  Tensor forward(const Tensor& ids);  // ids: (N...) i32/i64 -> (N..., C); stashes ids
  void backward(const Tensor& dout);  // dout: (N..., C); table.grad += scatter; frees stash
  void clear() { ids_ = Tensor(); }
  void transfer_stash(StashTransfer& t) { t(ids_); }
  Param& weight() { return table_; }

 private:
  Param table_;  // (V, C)
  Tensor ids_;
};

}  // namespace h2::models
