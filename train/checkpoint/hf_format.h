// Hugging Face model folders for LlamaForCausalLM, the format `transformers` saves and loads:
// config.json plus the weights, either one model.safetensors or, above a size threshold,
// model-00001-of-0000N.safetensors ... with model.safetensors.index.json mapping each tensor to
// its file. H2's parameter names and layouts are Hugging Face's (rotary embedding in the
// rotate_half convention), so tensors move across without permutation; only the dtype changes.
// A tied model has no lm_head.weight (transformers ties it to model.embed_tokens.weight).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "train/checkpoint/safetensors.h"
#include "train/config/config.h"

namespace h2::checkpoint {

// transformers' default max_shard_size "5GB" (decimal, as transformers counts it).
inline constexpr int64_t kDefaultHfShardBytes = 5'000'000'000;

struct HfTensorSpec {
  std::string name;
  Shape shape;
};

// Every weight of a Llama with this config in Hugging Face order (the order of
// models::Llama::named_parameters(): embedding, each layer, final norm, untied head).
std::vector<HfTensorSpec> hf_tensor_specs(const config::ModelConfig& model);

// config.json for LlamaForCausalLM as transformers 5 writes it (dtype, rope_parameters; rope_theta
// and rope_scaling too, for transformers 4); dtype is f32 or bf16.
std::string hf_config_json(const config::ModelConfig& model, DType dtype);

// generation_config.json: the special tokens that are set and max_length (model.seq_len).
std::string hf_generation_config_json(const config::ModelConfig& model);

struct HfConfig {
  config::ModelConfig model;
  DType dtype = DType::f32;  // torch_dtype (f32 when absent)
};
// Parses config.json text; `path` names the file in errors. ConfigError for a model H2 cannot
// represent (another model_type, biases, a RoPE variant other than llama3, another activation or
// head_dim). Special token ids are kept (the first of a list).
HfConfig parse_hf_config(const std::string& text, const std::string& path);

struct HfWriteOptions {
  DType dtype = DType::f32;                        // f32 or bf16 (round to nearest, ties to even)
  int64_t max_shard_bytes = kDefaultHfShardBytes;  // shard when the weights exceed this
  std::string source = "Hugging Face export";      // names the tensors' origin in errors
  std::string tokenizer_dir;          // tokenizer files to copy in (hf_tokenizer.h); else:
  bool byte_level_tokenizer = false;  // write the byte-level tokenizer (token id = byte)
};

// Writes config.json, generation_config.json, the tokenizer files `options` asks for and the
// weights into `dir` (created if needed), removing any such files left by an earlier export.
// `tensors` holds FP32 weights under their Hugging Face names: every tensor of
// hf_tensor_specs(model) with its shape (others are an error). Tensors are assigned to shards
// whole, in Hugging Face order, as transformers does.
void write_hf_model(const std::string& dir, const config::ModelConfig& model,
                    const TensorMap& tensors, const HfWriteOptions& options = {});

struct HfModel {
  HfConfig config;
  TensorMap tensors;  // every tensor of hf_tensor_specs(config.model), as f32
};
// Reads a folder written by write_hf_model or by transformers (single file or index). Every
// expected tensor must be present once with its shape and a float dtype (f32, bf16, f16);
// ConfigError names the file and the tensor otherwise. Rotary inverse-frequency buffers are
// ignored; an lm_head.weight of a tied model must equal the embedding.
HfModel read_hf_model(const std::string& dir);

// True when `dir` holds a config.json (a Hugging Face model folder rather than an H2 checkpoint).
bool is_hf_model_dir(const std::string& dir);

}  // namespace h2::checkpoint
