// Llama model properties: determinism for a seed, recomputation and cross-device bit-identity,
// gradient accumulation, tied embeddings (one parameter whose gradient sums both uses),
// Hugging Face names and shapes, and a BF16 smoke run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/tensor_host.h"
#include "tests/models/llama_reference.h"

namespace h2::test {
namespace {

using models::Llama;
using models::LlamaConfig;

constexpr int64_t kB = 2, kT = 5;

struct Batch {
  Tensor ids, targets;
};

Batch make_batch(Device& dev) {
  std::vector<int64_t> ids{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, targets{1, 4, 1, 5, 9, 2, 6, 5, 3, 10};
  return {tensor_from_ints(ids, {kB * kT}, DType::i32, dev),
          tensor_from_ints(targets, {kB * kT}, DType::i32, dev)};
}

// Every gradient, flattened in named_parameters() order.
std::vector<float> all_grads(Llama& model) {
  std::vector<float> out;
  for (const auto& np : model.named_parameters()) {
    std::vector<float> g = tensor_to_floats(np.grad);
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool bit_equal(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST(Llama, same_seed_gives_bit_identical_loss_and_grads) {
  Device& cpu = model_runtime().cpu();
  Batch batch = make_batch(cpu);
  Llama a(tiny_llama_config(), cpu, {.seed = 42}), b(tiny_llama_config(), cpu, {.seed = 42});
  const float la = a.forward_backward(batch.ids, batch.targets, kB, kT);
  const float lb = b.forward_backward(batch.ids, batch.targets, kB, kT);
  EXPECT_TRUE(bit_equal(la, lb)) << la << " vs " << lb;
  EXPECT_TRUE(bit_equal(all_grads(a), all_grads(b)));
  EXPECT_NEAR(la, std::log(11.0), 0.1) << "near-uniform predictions at init";

  Llama c(tiny_llama_config(), cpu, {.seed = 43});
  EXPECT_FALSE(
      bit_equal(all_grads(a), (c.forward_backward(batch.ids, batch.targets, kB, kT), all_grads(c))))
      << "another seed must give another model";
}

TEST(Llama, recompute_gives_bit_identical_grads) {
  Device& cpu = model_runtime().cpu();
  Batch batch = make_batch(cpu);
  Llama a(tiny_llama_config(), cpu, {.seed = 5}),
      b(tiny_llama_config(), cpu, {.seed = 5, .recompute = true});
  const float la = a.forward_backward(batch.ids, batch.targets, kB, kT);
  const float lb = b.forward_backward(batch.ids, batch.targets, kB, kT);
  EXPECT_TRUE(bit_equal(la, lb));
  EXPECT_TRUE(bit_equal(all_grads(a), all_grads(b)));
}

// Two micro-batches in flight at once, as a pipeline stage runs them (F0 F1 B0 B1, each unit's
// stash taken after its forward and put back before its backward), with and without
// recomputation, give the gradients of running them one after the other (F0 B0 F1 B1).
TEST(Llama, stashes_taken_out_let_micro_batches_overlap) {
  for (bool recompute : {false, true}) {
    Device& cpu = model_runtime().cpu();
    Batch first = make_batch(cpu);
    std::vector<int64_t> ids{7, 7, 2, 0, 1, 8, 3, 3, 9, 4}, targets{7, 2, 0, 1, 8, 3, 3, 9, 4, 6};
    Batch second{tensor_from_ints(ids, {kB * kT}, DType::i32, cpu),
                 tensor_from_ints(targets, {kB * kT}, DType::i32, cpu)};
    Llama sequential(tiny_llama_config(), cpu, {.seed = 9, .recompute = recompute});
    sequential.forward_backward(first.ids, first.targets, kB, kT, 0.5f);
    sequential.forward_backward(second.ids, second.targets, kB, kT, 0.5f);

    Llama overlapped(tiny_llama_config(), cpu, {.seed = 9, .recompute = recompute});
    std::vector<models::Unit*> units = overlapped.units();
    auto forward = [&](const Batch& b, std::vector<models::Stash>& stashes) {
      Tensor x = b.ids.view({kB, kT});
      for (models::Unit* u : units) {
        x = u->forward(x);
        stashes.push_back(u->take_stash());
      }
      return x.view({kB * kT, tiny_llama_config().vocab_size});
    };
    auto backward = [&](Tensor logits, const Batch& b, std::vector<models::Stash>& stashes) {
      Tensor grad = Tensor::empty(logits.shape(), logits.dtype(), cpu);
      nn::cross_entropy_loss(logits, b.targets, grad, 0.5f);
      grad = grad.view({kB, kT, tiny_llama_config().vocab_size});
      for (size_t i = units.size(); i-- > 0;) {
        units[i]->put_stash(std::move(stashes[i]));
        grad = units[i]->backward(grad);
      }
    };
    std::vector<models::Stash> s0, s1;
    Tensor logits0 = forward(first, s0);
    Tensor logits1 = forward(second, s1);
    backward(logits0, first, s0);
    backward(logits1, second, s1);
    EXPECT_TRUE(bit_equal(all_grads(overlapped), all_grads(sequential)))
        << "recompute " << recompute;
    EXPECT_THROW(units[1]->put_stash({}), Error) << "an empty stash must not fit a block";
  }
}

TEST(Llama, backward_accumulates_until_zero_grad) {
  Device& cpu = model_runtime().cpu();
  Batch batch = make_batch(cpu);
  Llama m(tiny_llama_config(), cpu, {.seed = 5});
  m.forward_backward(batch.ids, batch.targets, kB, kT);
  std::vector<float> once = all_grads(m);
  m.forward_backward(batch.ids, batch.targets, kB, kT);
  std::vector<float> twice = all_grads(m);
  for (float& g : once) g *= 2;  // g + g is exact in f32
  EXPECT_TRUE(bit_equal(once, twice));
  m.zero_grad();
  for (float g : all_grads(m)) ASSERT_EQ(g, 0.0f);
}

TEST(Llama, tied_embedding_is_one_parameter_whose_grad_sums_both_uses) {
  Device& cpu = model_runtime().cpu();
  Batch batch = make_batch(cpu);
  Llama tied(tiny_llama_config(true), cpu, {.seed = 9}),
      untied(tiny_llama_config(false), cpu, {.seed = 9});
  auto tp = tied.named_parameters(), up = untied.named_parameters();
  ASSERT_EQ(tp.size() + 1, up.size());
  for (const auto& np : tp) EXPECT_NE(np.name, "lm_head.weight");
  EXPECT_EQ(up.back().name, "lm_head.weight");
  up.back().param.copy_from(up.front().param);  // untied head := embedding: same function
  tied.forward_backward(batch.ids, batch.targets, kB, kT);
  untied.forward_backward(batch.ids, batch.targets, kB, kT);
  std::vector<float> sum = tensor_to_floats(up.front().grad),
                     head = tensor_to_floats(up.back().grad);
  std::vector<float> got = tensor_to_floats(tp.front().grad);
  float scale = 0;
  for (size_t i = 0; i < sum.size(); ++i) {
    sum[i] += head[i];
    scale = std::max(scale, std::abs(sum[i]));
  }
  for (size_t i = 0; i < sum.size(); ++i) ASSERT_NEAR(got[i], sum[i], 1e-6f * scale) << i;
}

TEST(Llama, parameter_names_and_shapes_follow_hugging_face) {
  Device& cpu = model_runtime().cpu();
  const LlamaConfig cfg = tiny_llama_config();
  Llama m(cfg, cpu, {});
  const int64_t V = 11, C = 16, H = 4, Hkv = 2, D = 4, F = 24;
  std::vector<std::pair<std::string, Shape>> want{{"model.embed_tokens.weight", {V, C}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    want.insert(want.end(), {{p + "input_layernorm.weight", {C}},
                             {p + "self_attn.q_proj.weight", {H * D, C}},
                             {p + "self_attn.k_proj.weight", {Hkv * D, C}},
                             {p + "self_attn.v_proj.weight", {Hkv * D, C}},
                             {p + "self_attn.o_proj.weight", {C, H * D}},
                             {p + "post_attention_layernorm.weight", {C}},
                             {p + "mlp.gate_proj.weight", {F, C}},
                             {p + "mlp.up_proj.weight", {F, C}},
                             {p + "mlp.down_proj.weight", {C, F}}});
  }
  want.push_back({"model.norm.weight", {C}});
  want.push_back({"lm_head.weight", {V, C}});
  auto got = m.named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].first);
    EXPECT_EQ(got[i].param.shape().str(), want[i].second.str()) << want[i].first;
    EXPECT_EQ(got[i].grad.shape().str(), want[i].second.str()) << want[i].first;
    EXPECT_EQ(got[i].grad.dtype(), DType::f32);
  }
  // Init: norms are exactly 1, other weights have std ~0.02.
  std::vector<float> norm = tensor_to_floats(got[1].param), q = tensor_to_floats(got[2].param);
  for (float w : norm) EXPECT_EQ(w, 1.0f);
  double ss = 0;
  for (float w : q) ss += double(w) * w;
  EXPECT_NEAR(std::sqrt(ss / double(q.size())), 0.02, 0.004);
}

TEST(Llama, vchip_is_bit_identical_to_cpu) {
  Runtime& rt = model_runtime();
  Device& cpu = rt.cpu();
  Device& chip = rt.device("vchip:0");
  Batch bc = make_batch(cpu), bv = make_batch(chip);
  Llama a(tiny_llama_config(), cpu, {.seed = 3}), b(tiny_llama_config(), chip, {.seed = 3});
  const float la = a.forward_backward(bc.ids, bc.targets, kB, kT);
  const float lb = b.forward_backward(bv.ids, bv.targets, kB, kT);
  EXPECT_TRUE(bit_equal(la, lb)) << la << " vs " << lb;
  EXPECT_TRUE(bit_equal(all_grads(a), all_grads(b)));
  EXPECT_TRUE(bit_equal(tensor_to_floats(a.forward_logits(bc.ids, kB, kT)),
                        tensor_to_floats(b.forward_logits(bv.ids, kB, kT))));
}

TEST(Llama, bf16_compute_runs_with_f32_grads) {
  Device& cpu = model_runtime().cpu();
  Batch batch = make_batch(cpu);
  Llama f(tiny_llama_config(), cpu, {.dtype = DType::f32, .seed = 4});
  Llama b(tiny_llama_config(), cpu, {.dtype = DType::bf16, .seed = 4, .recompute = true});
  const float lf = f.forward_backward(batch.ids, batch.targets, kB, kT);
  const float lb = b.forward_backward(batch.ids, batch.targets, kB, kT);
  EXPECT_NEAR(lb, lf, 0.02);
  std::vector<float> gf = all_grads(f), gb = all_grads(b);
  ASSERT_EQ(gf.size(), gb.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < gf.size(); ++i) {
    num += (double(gb[i]) - gf[i]) * (double(gb[i]) - gf[i]);
    den += double(gf[i]) * gf[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.05) << "bf16 gradient relative error";
  Tensor logits = b.forward_logits(batch.ids, kB, kT);
  EXPECT_EQ(logits.dtype(), DType::bf16);
  EXPECT_EQ(logits.shape().str(), Shape({kB * kT, 11}).str());
}

}  // namespace
}  // namespace h2::test
