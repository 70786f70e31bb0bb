// LlamaConfig: the hyper-parameters of a decoder-only Llama model, as a plain struct. The YAML
// config layer (train/config) maps the `model` section onto it and validates it; validate() here
// repeats the structural checks the model itself relies on, so a hand-built config fails loudly.
// Glossary: V vocab, C dim (channels), L layers, H query heads, Hkv key/value heads, D = C / H
// head dim, F MLP hidden dim, T sequence length.
#pragma once

#include <cstdint>

#include "core/rope_frequencies.h"

namespace h2::models {

struct LlamaConfig {
  int64_t vocab_size = 256;  // V
  int64_t dim = 128;         // C
  int64_t n_layers = 4;      // L
  int64_t n_heads = 4;       // H
  int64_t n_kv_heads = 4;    // Hkv; H % Hkv == 0
  int64_t ffn_dim = 344;     // F
  int64_t seq_len = 128;     // maximum T
  float rope_theta = 10000;
  RopeScaling rope_scaling;  // Llama 3 frequency scaling; factor 0: plain RoPE
  float norm_eps = 1e-5f;
  bool tie_embeddings = false;

  int64_t head_dim() const { return dim / n_heads; }  // D
  // Throws ConfigError naming the first inconsistent field (C % H, H % Hkv, D even, positives).
  void validate() const;
};

}  // namespace h2::models
