// h2_bench_lowp_linear: what low-precision emulation costs per transformer block, kernel by
// kernel, without the rest of a training step around it. One block's seven linear layers (q, k,
// v, o, gate, up, down; the model's own models::Linear, sharing the quantized input between q/k/v
// and between gate/up as the block does) run forward and backward on bf16 activations, once in
// the compute dtype (bf16 GEMMs) and once per low-precision recipe. Each figure is the median of
// --repeats timed passes, the recipes interleaved round by round so that a slow spell of the
// machine hits all of them alike. --micro-batches M runs M forwards and backwards per pass, as a
// step with gradient accumulation does, with the weights frozen for the pass as the runtime
// freezes them (each weight quantized once per orientation) and, as a second row per recipe,
// quantized per micro-batch as before; figures are per micro-batch. --breakdown adds each op of
// one linear layer timed alone.
// Shapes (default: configs/train/numerics-256.yaml): N tokens (batch x sequence), C the model
// width, F the FFN width; q/k/v/o (C -> C), gate/up (C -> F), down (F -> C).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/registry.h"
#include "bench/bench_common.h"
#include "bench/bench_main.h"
#include "core/lowp/recipe.h"
#include "core/ops.h"
#include "models/layers/linear.h"

namespace h2::bench {
namespace {

struct Settings {
  int64_t tokens = 1024, dim = 256, ffn = 688;
  int repeats = 21;
  int warmup = 3;
  std::vector<std::string> recipes = {"fp8_current", "fp8_blockwise", "mxfp8", "nvfp4", "mxfp4"};
  int micro_batches = 1;
  bool breakdown = false;  // also time one linear's ops one by one
};

// One block's linears with their inputs, outputs and gradients (bf16; weight grads f32).
class Block {
 public:
  Block(const Settings& s, Device& device) {
    auto linear = [&](const std::string& name, int64_t out, int64_t in) {
      return models::Linear(models::make_param("model.layers.0." + name + ".weight", {out, in},
                                               models::Init::normal, 0.02f, 1, DType::bf16,
                                               device));
    };
    for (const char* name : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"})
      qkv_.push_back(linear(name, s.dim, s.dim));
    o_.push_back(linear("self_attn.o_proj", s.dim, s.dim));
    for (const char* name : {"mlp.gate_proj", "mlp.up_proj"})
      gate_up_.push_back(linear(name, s.ffn, s.dim));
    down_.push_back(linear("mlp.down_proj", s.dim, s.ffn));
    x_ = random_tensor({s.tokens, s.dim}, DType::bf16, device, 3);
    h_ = random_tensor({s.tokens, s.ffn}, DType::bf16, device, 4);
    dy_c_ = random_tensor({s.tokens, s.dim}, DType::bf16, device, 5, 1e-3f);
    dy_f_ = random_tensor({s.tokens, s.ffn}, DType::bf16, device, 6, 1e-3f);
    out_c_ = Tensor::empty({s.tokens, s.dim}, DType::bf16, device);
    out_f_ = Tensor::empty({s.tokens, s.ffn}, DType::bf16, device);
    dx_c_ = Tensor::empty({s.tokens, s.dim}, DType::bf16, device);
    dx_f_ = Tensor::empty({s.tokens, s.ffn}, DType::bf16, device);
  }

  void set_recipe(const std::optional<lowp::Recipe>& recipe) {
    for (auto* group : {&qkv_, &o_, &gate_up_, &down_})
      for (models::Linear& l : *group) l.set_recipe(recipe);
  }

  void set_weights_frozen(bool frozen) {
    for (auto* group : {&qkv_, &o_, &gate_up_, &down_})
      for (models::Linear& l : *group) l.set_weights_frozen(frozen);
  }

  // Every linear's forward; groups that read one input share its quantization.
  void forward() {
    run_group(qkv_, [&](models::Linear& l, models::SharedInput* sh) { l.forward(out_c_, x_, sh); });
    run_group(o_, [&](models::Linear& l, models::SharedInput* sh) { l.forward(out_c_, x_, sh); });
    run_group(gate_up_,
              [&](models::Linear& l, models::SharedInput* sh) { l.forward(out_f_, x_, sh); });
    run_group(down_,
              [&](models::Linear& l, models::SharedInput* sh) { l.forward(out_c_, h_, sh); });
  }

  // Every linear's backward: dx (accumulated over a group, as the block does) and dW.
  void backward() {
    auto bwd = [](const Tensor& dx, const Tensor& dy, const Tensor& x) {
      return [&dx, &dy, &x](models::Linear& l, models::SharedInput* sh, bool first) {
        l.backward(dx, dy, x, !first, sh);
      };
    };
    run_group_indexed(qkv_, bwd(dx_c_, dy_c_, x_));
    run_group_indexed(o_, bwd(dx_c_, dy_c_, x_));
    run_group_indexed(gate_up_, bwd(dx_c_, dy_f_, x_));
    run_group_indexed(down_, bwd(dx_f_, dy_c_, h_));
  }

 private:
  template <class Fn>
  static void run_group(std::vector<models::Linear>& group, Fn&& fn) {
    models::SharedInput shared;
    for (models::Linear& l : group) fn(l, &shared);
  }
  template <class Fn>
  static void run_group_indexed(std::vector<models::Linear>& group, Fn&& fn) {
    models::SharedInput shared;
    for (size_t i = 0; i < group.size(); ++i) fn(group[i], &shared, i == 0);
  }

  std::vector<models::Linear> qkv_, o_, gate_up_, down_;
  Tensor x_, h_, dy_c_, dy_f_, out_c_, out_f_, dx_c_, dx_f_;
};

struct Timing {
  std::vector<double> forward, backward;
};

// The ops of one linear layer (C -> F, the gate projection), each timed on its own: the six
// quantizations (x and W of the forward, dy and W^T of dgrad, dy^T and x^T of wgrad) and the
// three GEMMs, quantized per `recipe` or in bf16 (no recipe). Where training takes W^T or dy^T
// as the other orientation's codes transposed (models::transposes_bit_for_bit), so does this,
// and the row says so. Prints one table row per op.
void op_breakdown(Device& device, const Settings& s, const std::optional<lowp::Recipe>& recipe) {
  const int64_t n = s.tokens, c = s.dim, f = s.ffn;
  Tensor x = random_tensor({n, c}, DType::bf16, device, 3);
  Tensor w = random_tensor({f, c}, DType::bf16, device, 7, 0.05f);
  Tensor dy = random_tensor({n, f}, DType::bf16, device, 6, 1e-3f);
  Tensor out = Tensor::empty({n, f}, DType::bf16, device);
  Tensor dx = Tensor::empty({n, c}, DType::bf16, device);
  Tensor dw = Tensor::zeros({f, c}, DType::f32, device);
  auto q = [&](const lowp::QuantSpec& spec, const Tensor& in, bool transpose) {
    const int64_t rows = in.size(transpose ? 1 : 0), cols = in.size(transpose ? 0 : 1);
    return lowp::QTensor::empty(spec, rows, cols, device);
  };
  // The quantized operands (unused in bf16) live as long as the timed calls.
  const lowp::Recipe& r = recipe ? *recipe : lowp::find_recipe("fp8_current");
  lowp::QTensor xq = q(r.input, x, false), wq = q(r.weight, w, false);
  lowp::QTensor dyq = q(r.grad, dy, false), wtq = q(r.weight, w, true);
  lowp::QTensor dytq = q(r.grad, dy, true), xtq = q(r.input, x, true);
  std::vector<std::pair<std::string, std::function<void()>>> ops_to_time;
  if (!recipe) {
    ops_to_time = {
        {"fwd GEMM", [&] { ops::matmul({.out = out, .a = x, .b = w, .trans_b = true}); }},
        {"dgrad GEMM", [&] { ops::matmul({.out = dx, .a = dy, .b = w}); }},
        {"wgrad GEMM (bf16, f32 accumulated)", [&] { models::accumulate_weight_grad(dw, dy, x); }},
    };
  } else {
    auto quantize = [&](lowp::QTensor& qt, const Tensor& in, bool transpose, bool stochastic) {
      return [&qt, &in, transpose, stochastic] {
        ops::quantize({.q = qt, .in = in, .transpose = transpose, .stochastic = stochastic});
      };
    };
    const bool sr = recipe->grad_stochastic;
    // The other orientation's codes transposed (each call makes a new QTensor, as training's).
    auto transpose = [](const lowp::QTensor& codes) {
      return [&codes] { models::transposed(codes); };
    };
    const bool w_transposes = models::transposes_bit_for_bit(r.weight, r.scaling);
    const bool dy_transposes = !sr && models::transposes_bit_for_bit(r.grad, r.scaling);
    using Op = std::pair<std::string, std::function<void()>>;
    // Every operand quantized once first: the transposes read codes, the GEMMs all six.
    for (const auto& [qt, in, in_transposed] :
         {std::tuple{&xq, &x, false}, std::tuple{&wq, &w, false}, std::tuple{&wtq, &w, true},
          std::tuple{&dyq, &dy, false}, std::tuple{&dytq, &dy, true}, std::tuple{&xtq, &x, true}})
      ops::quantize({.q = *qt, .in = *in, .transpose = in_transposed});
    ops_to_time = {
        {"quantize x", quantize(xq, x, false, false)},
        {"quantize W", quantize(wq, w, false, false)},
        w_transposes ? Op{"W^T as W's codes transposed", transpose(wq)}
                     : Op{"quantize W^T", quantize(wtq, w, true, false)},
        {"quantize dy", quantize(dyq, dy, false, sr)},
        dy_transposes ? Op{"dy^T as dy's codes transposed", transpose(dyq)}
                      : Op{"quantize dy^T", quantize(dytq, dy, true, sr)},
        {"quantize x^T", quantize(xtq, x, true, false)},
        {"fwd qmatmul", [&] { ops::qmatmul({.out = out, .a = xq, .b = wq}); }},
        {"dgrad qmatmul", [&] { ops::qmatmul({.out = dx, .a = dyq, .b = wtq}); }},
        {"wgrad qmatmul", [&] { ops::qmatmul({.out = dw, .a = dytq, .b = xtq, .beta = 1}); }},
    };
  }
  double total = 0;
  for (auto& [name, fn] : ops_to_time) {
    const double t = median(time_runs(device, fn, s.warmup, s.repeats));
    total += t;
    fmt::print("| {} | {} | {:.3f} |\n", recipe ? recipe->name : "bf16", name, t * 1e3);
  }
  fmt::print("| {} | **sum** | {:.3f} |\n", recipe ? recipe->name : "bf16", total * 1e3);
}

// One row of the block table: a recipe (none: bf16 GEMMs), and whether the pass freezes the
// weights (quantized once per pass instead of once per micro-batch).
struct Variant {
  std::string name;
  std::optional<lowp::Recipe> recipe;
  bool frozen = true;
};

std::vector<Variant> variants(const Settings& s) {
  std::vector<Variant> list = {{"bf16 (compute)", std::nullopt, true}};
  for (const std::string& r : s.recipes) {
    list.push_back({r, lowp::find_recipe(r), true});
    if (s.micro_batches > 1)
      list.push_back({r + ", W per micro-batch", lowp::find_recipe(r), false});
  }
  return list;
}

int run(const Settings& s, int threads) {
  RuntimeOptions options = RuntimeOptions::from_env();
  options.cpu.threads = threads;
  auto runtime = create_runtime(options);
  Device& cpu = runtime->cpu();
  Block block(s, cpu);
  const std::vector<Variant> rows = variants(s);
  std::map<std::string, Timing> timings;
  auto pass = [&](const Variant& v, Timing* t) {
    block.set_recipe(v.recipe);
    block.set_weights_frozen(v.frozen);
    double f = 0, b = 0;
    for (int mb = 0; mb < s.micro_batches; ++mb) {
      f += time_runs(
          cpu, [&] { block.forward(); }, 0, 1)[0];
      b += time_runs(
          cpu, [&] { block.backward(); }, 0, 1)[0];
    }
    block.set_weights_frozen(false);
    if (t != nullptr) {
      t->forward.push_back(f / s.micro_batches);
      t->backward.push_back(b / s.micro_batches);
    }
  };
  for (int w = 0; w < s.warmup; ++w)
    for (const Variant& v : rows) pass(v, nullptr);
  for (int r = 0; r < s.repeats; ++r)
    for (const Variant& v : rows) pass(v, &timings[v.name]);

  fmt::print("# H2 low-precision linear layers, one block\n\n");
  fmt::print(
      "device: {} ({}); N {} tokens, C {}, F {}; {} micro-batch(es) per pass, ms per micro-batch; "
      "median of {} passes, recipes interleaved\n\n",
      cpu.str(), cpu.props().name, s.tokens, s.dim, s.ffn, s.micro_batches, s.repeats);
  fmt::print(
      "| GEMMs | forward ms | backward ms | total ms | vs bf16 |\n|---|---:|---:|---:|---:|\n");
  const Timing& base = timings[rows[0].name];
  const double base_total = median(base.forward) + median(base.backward);
  for (const Variant& v : rows) {
    const Timing& t = timings[v.name];
    const double f = median(t.forward), b = median(t.backward);
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f}x |\n", v.name, f * 1e3, b * 1e3,
               (f + b) * 1e3, (f + b) / base_total);
  }
  if (s.breakdown) {
    fmt::print("\n## Op by op: the gate projection ({} x {} -> {}), median of {}\n\n", s.tokens,
               s.dim, s.ffn, s.repeats);
    fmt::print("| recipe | op | ms |\n|---|---|---:|\n");
    for (const Variant& v : rows)
      if (v.frozen) op_breakdown(cpu, s, v.recipe);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace h2::bench

int main(int argc, char** argv) {
  h2::bench::Settings s;
  int threads = 0;
  CLI::App app{"Cost of low-precision emulation in one transformer block's linear layers",
               "h2_bench_lowp_linear"};
  app.add_option("--tokens", s.tokens, "Tokens per pass (N)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dim", s.dim, "Model width (C)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--ffn", s.ffn, "FFN width (F)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--repeats", s.repeats, "Timed passes per recipe (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", s.warmup, "Untimed passes per recipe first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: every core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--recipes", s.recipes, "Low-precision recipes to compare with bf16")
      ->check(CLI::IsMember(std::vector<std::string>(h2::lowp::recipe_names().begin(),
                                                     h2::lowp::recipe_names().end())))
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--micro-batches", s.micro_batches,
                 "Forwards and backwards per pass, weights frozen for the pass; above 1 each "
                 "recipe also runs with its weights quantized per micro-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--breakdown", s.breakdown,
               "Also time the ops of one linear layer (quantizations, GEMMs) one by one");
  return h2::bench::parse_and_run(app, argc, argv, [&] { return h2::bench::run(s, threads); });
}
