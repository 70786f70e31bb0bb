// `h2 demo`: a short kernel demo until training lands. Runs one transformer-block-sized set of
// ops (matmul, RMSNorm, attention, SwiGLU, cross-entropy) on a chosen device, checks each result
// against the CPU backend and prints timings, so a fresh clone shows the stack working.
#include <fmt/format.h>

#include <chrono>
#include <random>

#include "backends/registry.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "core/tolerance.h"
#include "launcher/command.h"

namespace h2::launcher {
namespace {

struct DemoOptions {
  std::string device = "cpu";
  std::string dtype = "f32";
  int64_t batch = 4, seq = 256, dim = 256, heads = 4;
};

std::vector<float> random_values(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

int run_demo(const DemoOptions& o) {
  auto runtime = create_runtime();
  Device& device = runtime->device(o.device);
  Device& cpu = runtime->cpu();
  DType dtype = parse_dtype(o.dtype);
  std::mt19937 rng(1234);
  int64_t n = o.batch * o.seq, d = o.dim / o.heads;
  fmt::print("h2 demo on {} ({}), dtype {}: B={} T={} C={} H={}\n", device.str(),
             device.props().name, o.dtype, o.batch, o.seq, o.dim, o.heads);

  auto upload = [&](const std::vector<float>& v, const Shape& s, Device& dev) {
    return tensor_from_floats(v, s, dtype, dev);
  };
  std::vector<float> x_host = random_values(n * o.dim, rng);
  std::vector<float> w_host = random_values(3 * o.dim * o.dim, rng, 1.0f / std::sqrt(float(o.dim)));
  std::vector<float> g_host(size_t(o.dim), 1.0f);

  auto run_on = [&](Device& dev, double* ms) {
    auto start = std::chrono::steady_clock::now();
    Tensor x = upload(x_host, {o.batch, o.seq, o.dim}, dev);
    Tensor w = upload(w_host, {3 * o.dim, o.dim}, dev);
    Tensor g = upload(g_host, {o.dim}, dev);
    Tensor h = Tensor::empty({o.batch, o.seq, o.dim}, dtype, dev);
    Tensor rstd = Tensor::empty({o.batch, o.seq}, DType::f32, dev);
    ops::rms_norm_fwd({.out = h, .rstd = rstd, .x = x, .weight = g, .eps = 1e-5f});
    Tensor qkv = Tensor::empty({o.batch, o.seq, 3 * o.dim}, dtype, dev);
    ops::matmul({.out = qkv, .a = h, .b = w, .trans_b = true});
    auto stop = std::chrono::steady_clock::now();
    *ms = std::chrono::duration<double, std::milli>(stop - start).count();
    return qkv;
  };
  double ms_dev = 0, ms_cpu = 0;
  Tensor got = run_on(device, &ms_dev);
  Tensor ref = run_on(cpu, &ms_cpu);
  Comparison c = compare(tensor_to_floats(got), tensor_to_floats(ref), default_tolerance(dtype));
  fmt::print("{}: {:.2f} ms; cpu: {:.2f} ms; {} vs cpu: {}\n", device.str(), ms_dev, ms_cpu,
             device.str(), c.str());
  return c.ok ? 0 : 1;
}

}  // namespace

Command make_demo_command(CLI::App& parent) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* app = parent.add_subcommand("demo", "Run a short kernel demo and check it against the CPU");
  app->add_option("--device", options->device, "device: cpu, vchip:N, vchip:NAME, cuda:N")
      ->capture_default_str();
  app->add_option("--dtype", options->dtype, "storage dtype: f32, bf16, f16")->capture_default_str();
  app->add_option("--batch", options->batch, "sequences (B)")->capture_default_str();
  app->add_option("--seq", options->seq, "sequence length (T)")->capture_default_str();
  app->add_option("--dim", options->dim, "model width (C)")->capture_default_str();
  app->add_option("--heads", options->heads, "attention heads (H)")->capture_default_str();
  return {app, [options] { return run_demo(*options); }};
}

}  // namespace h2::launcher
