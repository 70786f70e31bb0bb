// What the planner tests share: a small Llama shape and a search job (cluster, profiles, model,
// search space) built by hand.
//   model(L): T x C = 8 x 16 (512 bytes per row in f32); parameters: embedding 64 x 16 = 1024,
//   block 2 x 256 + 2 x 256 + 3 x 512 + 32 = 2592, untied head 16 + 1024 = 1040.
#pragma once

#include "core/cluster.h"
#include "parallel/planner/search.h"

namespace h2::parallel::planner::test {

inline ModelShape model(int layers, bool tie = false) {
  return {.vocab_size = 64,
          .dim = 16,
          .n_layers = layers,
          .n_heads = 2,
          .n_kv_heads = 2,
          .ffn_dim = 32,
          .seq_len = 8,
          .tie_embeddings = tie};
}

struct Job {
  Cluster cluster;
  Profiles profiles;
  ModelShape m;
  SearchSpace space;
  CostInputs inputs() const { return {&cluster, m, DType::f32, &profiles}; }
};

}  // namespace h2::parallel::planner::test
