// Double reference forward of Llama: embedding, L x (RMSNorm, q/k/v, RoPE, causal GQA, o_proj,
// residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm, head, mean cross-entropy.
// Shapes: N = B*T rows; x (N, C); q (N, H*D); k, v (N, Hkv*D); g, u (N, F); logits (N, V).
#include "tests/models/llama_reference.h"

#include <memory>

#include "backends/registry.h"
#include "core/tensor_host.h"

namespace h2::test {
namespace {

// x (N, in) @ w^T, w (out, in) -> (N, out).
ref::Vec linear(const ref::Vec& x, const ref::Vec& w, int64_t N, int64_t in, int64_t out) {
  ref::MatmulDims d{.S = 1, .M = N, .N = out, .K = in, .trans_b = true};
  return ref::matmul(x, w, {}, d, 1, 0);
}

}  // namespace

double reference_loss(const models::LlamaConfig& cfg, const ParamMap& p, const ref::Ids& ids,
                      const ref::Ids& targets, int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg.dim, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int64_t D = cfg.head_dim(), F = cfg.ffn_dim, V = cfg.vocab_size;
  const double eps = double(cfg.norm_eps), theta = double(cfg.rope_theta);
  auto at = [&](const std::string& name) -> const ref::Vec& { return p.at(name); };
  ref::Vec x = ref::embedding_fwd(at("model.embed_tokens.weight"), ids, C);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    ref::Vec h = ref::rms_norm_fwd(x, at(pre + "input_layernorm.weight"), C, eps).out;
    ref::Vec q = linear(h, at(pre + "self_attn.q_proj.weight"), N, C, H * D);
    ref::Vec k = linear(h, at(pre + "self_attn.k_proj.weight"), N, C, Hkv * D);
    ref::Vec v = linear(h, at(pre + "self_attn.v_proj.weight"), N, C, Hkv * D);
    q = ref::rope(q, B, T, H, D, theta, 0, 1);
    k = ref::rope(k, B, T, Hkv, D, theta, 0, 1);
    ref::Vec a = ref::attention_fwd(q, k, v, {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D}).out;
    ref::Vec o = linear(a, at(pre + "self_attn.o_proj.weight"), N, H * D, C);
    x = ref::add(x, &o, 1, 1);
    h = ref::rms_norm_fwd(x, at(pre + "post_attention_layernorm.weight"), C, eps).out;
    ref::Vec g = linear(h, at(pre + "mlp.gate_proj.weight"), N, C, F);
    ref::Vec u = linear(h, at(pre + "mlp.up_proj.weight"), N, C, F);
    ref::Vec m = linear(ref::swiglu_fwd(g, u), at(pre + "mlp.down_proj.weight"), N, F, C);
    x = ref::add(x, &m, 1, 1);
  }
  ref::Vec h = ref::rms_norm_fwd(x, at("model.norm.weight"), C, eps).out;
  const ref::Vec& head =
      cfg.tie_embeddings ? at("model.embed_tokens.weight") : at("lm_head.weight");
  ref::Vec logits = linear(h, head, N, C, V);
  ref::Vec losses = ref::cross_entropy_fwd(logits, targets, V, -100).losses;
  int64_t count = 0;
  for (int64_t t : targets) count += t != -100;
  return ref::sum(losses) / double(count);
}

Runtime& model_runtime() {
  static std::unique_ptr<Runtime> runtime = [] {
    RuntimeOptions options = RuntimeOptions::from_env();
    options.vchip_time_scale = 0;
    return create_runtime(options);
  }();
  return *runtime;
}

ParamMap params_as_double(models::Llama& model) {
  ParamMap out;
  for (const auto& np : model.named_parameters()) {
    std::vector<float> f = tensor_to_floats(np.param);
    out[np.name] = ref::Vec(f.begin(), f.end());
  }
  return out;
}

models::LlamaConfig tiny_llama_config(bool tie_embeddings) {
  return {.vocab_size = 11,
          .dim = 16,
          .n_layers = 2,
          .n_heads = 4,
          .n_kv_heads = 2,
          .ffn_dim = 24,
          .seq_len = 8,
          .tie_embeddings = tie_embeddings};
}

}  // namespace h2::test
