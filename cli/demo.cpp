// `h2 demo`: the main job until training lands. Runs one Llama block forward (RMSNorm, QKV
// projection, rotary embedding, causal GQA attention, output projection, residual, SwiGLU MLP),
// an LM head and the cross-entropy loss with its gradient, on a chosen device; then runs the
// same on cpu:0 and checks the device's results against it. Prints the time of each op.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

#include "backends/registry.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "core/tolerance.h"

namespace h2::cli {
namespace {

struct DemoOptions {
  std::string device = "cpu";
  std::string dtype = "f32";
  int64_t batch = 2, seq = 128, dim = 256, heads = 4, kv_heads = 2, vocab = 512;
};

// Times each op call on `device` and keeps a row per op for the report.
class Timeline {
 public:
  explicit Timeline(Device& device) : device_(device) {}
  template <class Fn>
  void run(const char* name, Fn&& fn) {
    auto start = std::chrono::steady_clock::now();
    fn();
    device_.default_stream().synchronize();
    rows_.emplace_back(
        name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count());
  }
  const std::vector<std::pair<std::string, double>>& rows() const { return rows_; }

 private:
  Device& device_;
  std::vector<std::pair<std::string, double>> rows_;
};

struct Inputs {
  std::vector<float> x, w_qkv, w_o, w_gate_up, w_down, w_head, norm;
  std::vector<int64_t> targets;
};

Inputs make_inputs(const DemoOptions& o) {
  std::mt19937 rng(1234);
  auto normal = [&](int64_t n, double fan_in) {
    std::normal_distribution<float> dist(0.0f, float(1.0 / std::sqrt(fan_in)));
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = dist(rng);
    return v;
  };
  int64_t n = o.batch * o.seq, head_dim = o.dim / o.heads, ffn = 2 * o.dim;
  int64_t qkv = o.dim + 2 * o.kv_heads * head_dim;
  Inputs in{normal(n * o.dim, 1),
            normal(qkv * o.dim, double(o.dim)),
            normal(o.dim * o.dim, double(o.dim)),
            normal(2 * ffn * o.dim, double(o.dim)),
            normal(o.dim * ffn, double(ffn)),
            normal(o.vocab * o.dim, double(o.dim)),
            std::vector<float>(size_t(o.dim), 1.0f),
            {}};
  std::uniform_int_distribution<int64_t> token(0, o.vocab - 1);
  for (int64_t i = 0; i < n; ++i) in.targets.push_back(token(rng));
  return in;
}

struct Outputs {
  Tensor logits, losses, dlogits;
};

Outputs run_block(const DemoOptions& o, const Inputs& in, DType dtype, Device& dev, Timeline& t) {
  int64_t b = o.batch, s = o.seq, c = o.dim, hd = o.dim / o.heads, kv = o.kv_heads * hd,
          ffn = 2 * o.dim;
  auto up = [&](const std::vector<float>& v, const Shape& shape) {
    return tensor_from_floats(v, shape, dtype, dev);
  };
  Tensor x = up(in.x, {b, s, c}), norm = up(in.norm, {c});
  Tensor w_qkv = up(in.w_qkv, {c + 2 * kv, c}), w_o = up(in.w_o, {c, c});
  Tensor w_gate_up = up(in.w_gate_up, {2 * ffn, c}), w_down = up(in.w_down, {c, ffn});
  Tensor w_head = up(in.w_head, {o.vocab, c});
  Tensor targets = tensor_from_ints(in.targets, {b * s}, DType::i64, dev);
  auto empty = [&](const Shape& shape, DType type) { return Tensor::empty(shape, type, dev); };

  Tensor h = empty({b, s, c}, dtype), rstd = empty({b, s}, DType::f32),
         qkv = empty({b, s, c + 2 * kv}, dtype);
  t.run("rms_norm_fwd",
        [&] { ops::rms_norm_fwd({.out = h, .rstd = rstd, .x = x, .weight = norm}); });
  t.run("matmul qkv", [&] { ops::matmul({.out = qkv, .a = h, .b = w_qkv, .trans_b = true}); });
  Tensor q = qkv.slice(2, 0, c).contiguous().view({b, s, o.heads, hd});
  Tensor k = qkv.slice(2, c, c + kv).contiguous().view({b, s, o.kv_heads, hd});
  Tensor v = qkv.slice(2, c + kv, c + 2 * kv).contiguous().view({b, s, o.kv_heads, hd});
  t.run("rope_fwd q,k", [&] {
    ops::rope_fwd({.out = q, .x = q});
    ops::rope_fwd({.out = k, .x = k});
  });
  Tensor attn = empty({b, s, o.heads, hd}, dtype), lse = empty({b, o.heads, s}, DType::f32);
  t.run("attention_fwd",
        [&] { ops::attention_fwd({.out = attn, .lse = lse, .q = q, .k = k, .v = v}); });
  t.run("matmul o + residual", [&] {
    ops::matmul({.out = x, .a = attn.view({b, s, c}), .b = w_o, .trans_b = true, .beta = 1});
  });
  Tensor gate_up = empty({b, s, 2 * ffn}, dtype), act = empty({b, s, ffn}, dtype);
  t.run("rms_norm_fwd",
        [&] { ops::rms_norm_fwd({.out = h, .rstd = rstd, .x = x, .weight = norm}); });
  t.run("matmul gate,up",
        [&] { ops::matmul({.out = gate_up, .a = h, .b = w_gate_up, .trans_b = true}); });
  t.run("swiglu_fwd", [&] {
    ops::swiglu_fwd(
        {.out = act, .gate = gate_up.slice(2, 0, ffn), .up = gate_up.slice(2, ffn, 2 * ffn)});
  });
  t.run("matmul down + residual",
        [&] { ops::matmul({.out = x, .a = act, .b = w_down, .trans_b = true, .beta = 1}); });
  Tensor logits = empty({b * s, o.vocab}, dtype);
  t.run("matmul lm head", [&] {
    ops::matmul({.out = logits, .a = x.view({b * s, c}), .b = w_head, .trans_b = true});
  });
  Tensor losses = empty({b * s}, DType::f32), row_lse = empty({b * s}, DType::f32),
         dlogits = empty({b * s, o.vocab}, dtype);
  t.run("cross_entropy fwd+bwd", [&] {
    ops::cross_entropy_fwd(
        {.losses = losses, .lse = row_lse, .logits = logits, .targets = targets});
    ops::cross_entropy_bwd({.dlogits = dlogits,
                            .logits = logits,
                            .lse = row_lse,
                            .targets = targets,
                            .dloss = 1.0f / float(b * s)});
  });
  return {logits, losses, dlogits};
}

int run_demo(const DemoOptions& o) {
  auto runtime = create_runtime();
  Device& device = runtime->device(o.device);
  DType dtype = parse_dtype(o.dtype);
  if (o.dim % o.heads != 0 || o.heads % o.kv_heads != 0)
    H2_THROW(ConfigError, "--dim {} must divide by --heads {}, and --heads by --kv-heads {}", o.dim,
             o.heads, o.kv_heads);
  fmt::print(
      "h2 demo: one Llama block + LM head + loss on {} ({}), {}; B={} T={} C={} H={} Hkv={} V={}\n",
      device.str(), device.props().name, o.dtype, o.batch, o.seq, o.dim, o.heads, o.kv_heads,
      o.vocab);
  Inputs inputs = make_inputs(o);
  Timeline on_device(device), on_cpu(runtime->cpu());
  Outputs got = run_block(o, inputs, dtype, device, on_device);
  Outputs ref = run_block(o, inputs, DType::f32, runtime->cpu(), on_cpu);

  fmt::print("{:<24} {:>12} {:>12}\n", "op", device.str() + " ms", "cpu:0 f32 ms");
  for (size_t i = 0; i < on_device.rows().size(); ++i)
    fmt::print("{:<24} {:>12.3f} {:>12.3f}\n", on_device.rows()[i].first,
               on_device.rows()[i].second, on_cpu.rows()[i].second);
  auto mean = [](const std::vector<float>& v) {
    double total = 0;
    for (float e : v) total += e;
    return total / double(v.size());
  };
  double loss = mean(tensor_to_floats(got.losses)), ref_loss = mean(tensor_to_floats(ref.losses));
  // The block is a few dozen roundings deep: judge it at the dtype's tolerance, with the
  // relative part scaled up for the depth. Loss: uniform over V would be ln(V).
  Tolerance tol = default_tolerance(dtype);
  tol.rtol *= 4;
  tol.atol *= 4;
  Comparison logits = compare(tensor_to_floats(got.logits), tensor_to_floats(ref.logits), tol);
  fmt::print("loss {:.5f} (cpu f32 {:.5f}; ln V = {:.5f})\nlogits vs cpu f32: {}\n", loss, ref_loss,
             std::log(double(o.vocab)), logits.str());
  bool ok = logits.ok && std::abs(loss - ref_loss) <= tol.atol + tol.rtol * std::abs(ref_loss);
  fmt::print("{}\n", ok ? "demo OK" : "demo FAILED: results differ from the CPU reference");
  return ok ? 0 : 1;
}

}  // namespace

Command make_demo_command(CLI::App& parent) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* app = parent.add_subcommand(
      "demo", "Run one Llama block, an LM head and the loss on a device; check against cpu:0");
  app->add_option("--device", options->device, "cpu, vchip:N, vchip:NAME or cuda:N")
      ->capture_default_str();
  app->add_option("--dtype", options->dtype, "storage dtype: f32, bf16, f16")
      ->capture_default_str();
  app->add_option("--batch", options->batch, "sequences (B)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--seq", options->seq, "sequence length (T)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--dim", options->dim, "model width (C)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--heads", options->heads, "query heads (H)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--kv-heads", options->kv_heads, "key/value heads (Hkv)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--vocab", options->vocab, "vocabulary (V)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return {app, [options] { return run_demo(*options); }};
}

}  // namespace h2::cli
