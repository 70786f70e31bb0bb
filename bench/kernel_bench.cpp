// h2_bench_kernels: throughput of H2's CPU kernels, printed as markdown tables.
//   (a) the machine's GEMM peak, measured with H2's own matmul op (2048^3, 4096^3; best of N);
//   (b) every GEMM of one training step of a 124M-parameter Llama (V 50257, C 768, 12 heads,
//       FFN 2048, 2 x 256 tokens): forward Y = X W^T, dX = dY W, dW = dY^T X, vs that peak;
//   (c) causal attention forward + backward per token, with FLOPs from core/op_cost.h;
//   (d) the low-precision batch encoders (core/lowp/formats.h), one thread, ns per value, on the
//       fastest path the CPU has and on the portable loops (--sections encoders; not by default).
// Each figure is the median of --repeats timed calls after --warmup untimed ones.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "bench/bench_common.h"
#include "bench/bench_main.h"
#include "core/error.h"
#include "core/lowp/formats.h"
#include "core/op_cost.h"
#include "core/ops.h"

namespace h2::bench {
namespace {

struct Settings {
  int repeats = 5;
  int warmup = 1;
  int peak_repeats = 3;
  double peak_gflops = 0;  // > 0: use this instead of measuring
  std::string gemm_dtype = "f32";
  std::vector<std::string> sections = {"peak", "gemm", "attention"};
  int tokens = 512;  // batch 2 x sequence 256
};

// One GEMM: out (M, N) = op(a) @ op(b), a (M, K) or (K, M) with trans_a, b (K, N) or (N, K).
struct Gemm {
  std::string name;
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  int per_step = 1;  // how often one training step runs it (12 layers)
};

struct GemmResult {
  double seconds = 0;  // median
  double flops = 0;
  std::string error;  // non-empty: the op threw
};

GemmResult run_gemm(Device& device, const Gemm& g, DType dtype, int warmup, int repeats,
                    bool best_of = false) {
  Shape a_shape = g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k};
  Shape b_shape = g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n};
  Tensor a = random_tensor(a_shape, dtype, device, 1);
  Tensor b = random_tensor(b_shape, dtype, device, 2, 0.05f);
  Tensor out = Tensor::empty({g.m, g.n}, dtype, device);
  MatmulArgs args{.out = out, .a = a, .b = b, .trans_a = g.trans_a, .trans_b = g.trans_b};
  GemmResult r;
  r.flops = op_cost_matmul(args).flops;
  try {
    auto s = time_runs(
        device, [&] { ops::matmul(args); }, warmup, repeats);
    r.seconds = best_of ? minimum(s) : median(s);
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

std::string short_error(const std::string& what) {
  std::string s = what.substr(what.rfind(": ") == std::string::npos ? 0 : what.rfind(": ") + 2);
  return "n/a (" + s + ")";
}

// (a) Best-of-N GFLOP/s of square f32 GEMMs; the largest is the peak the table divides by.
double measure_peak(Device& device, const Settings& s) {
  fmt::print("## GEMM peak (H2 matmul, f32, best of {})\n\n", s.peak_repeats);
  fmt::print("| size | ms (best) | GFLOP/s |\n|---|---:|---:|\n");
  double peak = 0;
  for (int64_t n : {2048, 4096}) {
    GemmResult r = run_gemm(device, {"square", n, n, n}, DType::f32, 1, s.peak_repeats, true);
    if (!r.error.empty()) {
      fmt::print("| {0}^3 | {1} | {1} |\n", n, short_error(r.error));
      continue;
    }
    double gflops = r.flops / r.seconds / 1e9;
    peak = std::max(peak, gflops);
    fmt::print("| {}^3 | {:.1f} | {:.1f} |\n", n, r.seconds * 1e3, gflops);
  }
  fmt::print("\nMeasured peak: {:.1f} GFLOP/s\n\n", peak);
  return peak;
}

// The GEMMs of one training step: per layer q, k, v, o (C x C), gate and up (C -> F), down
// (F -> C); once per step the LM head (C -> V). Weights are stored (out, in) as in PyTorch.
std::vector<Gemm> training_step_gemms(int64_t tokens) {
  const int64_t c = 768, f = 2048, v = 50257, layers = 12;
  struct Linear {
    std::string name;
    int64_t in, out;
    int per_step;
  };
  std::vector<Linear> linears = {{"q/k/v/o", c, c, int(4 * layers)},
                                 {"gate/up", c, f, int(2 * layers)},
                                 {"down", f, c, int(layers)},
                                 {"lm_head", c, v, 1}};
  std::vector<Gemm> gemms;
  for (const Linear& l : linears) {
    // Y (N, out) = X (N, in) @ W^T;  dX (N, in) = dY (N, out) @ W;  dW (out, in) = dY^T @ X.
    gemms.push_back({l.name + " fwd", tokens, l.out, l.in, false, true, l.per_step});
    gemms.push_back({l.name + " dX", tokens, l.in, l.out, false, false, l.per_step});
    gemms.push_back({l.name + " dW", l.out, l.in, tokens, true, false, l.per_step});
  }
  return gemms;
}

void gemm_table(Device& device, const Settings& s, double peak) {
  DType dtype = parse_dtype(s.gemm_dtype);
  fmt::print("## Training-step GEMMs ({}, {} tokens, median of {})\n\n", s.gemm_dtype, s.tokens,
             s.repeats);
  fmt::print("| GEMM | M x N x K | op | per step | ms | GFLOP/s | % of peak |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|\n");
  double step_flops = 0, step_seconds = 0;
  for (const Gemm& g : training_step_gemms(s.tokens)) {
    GemmResult r = run_gemm(device, g, dtype, s.warmup, s.repeats);
    std::string op = g.trans_a ? "A^T B" : g.trans_b ? "A B^T" : "A B";
    std::string dims = fmt::format("{} x {} x {}", g.m, g.n, g.k);
    if (!r.error.empty()) {
      fmt::print("| {} | {} | {} | {} | {} | | |\n", g.name, dims, op, g.per_step,
                 short_error(r.error));
      continue;
    }
    double gflops = r.flops / r.seconds / 1e9;
    std::string pct = peak > 0 ? fmt::format("{:.0f}%", 100 * gflops / peak) : "-";
    fmt::print("| {} | {} | {} | {} | {:.2f} | {:.1f} | {} |\n", g.name, dims, op, g.per_step,
               r.seconds * 1e3, gflops, pct);
    step_flops += r.flops * g.per_step;
    step_seconds += r.seconds * g.per_step;
  }
  if (step_seconds <= 0) return;
  double gflops = step_flops / step_seconds / 1e9;
  fmt::print("\nOne step's GEMMs: {:.1f} GFLOP in {:.0f} ms = {:.1f} GFLOP/s{}\n\n",
             step_flops / 1e9, step_seconds * 1e3, gflops,
             peak > 0 ? fmt::format(" ({:.0f}% of peak)", 100 * gflops / peak) : "");
}

struct AttentionConfig {
  int64_t b, t, h, d;
};

void attention_row(Device& device, const AttentionConfig& cfg, DType dtype, const Settings& s) {
  Shape qkv{cfg.b, cfg.t, cfg.h, cfg.d};
  Tensor q = random_tensor(qkv, dtype, device, 11), k = random_tensor(qkv, dtype, device, 12);
  Tensor v = random_tensor(qkv, dtype, device, 13), dout = random_tensor(qkv, dtype, device, 14);
  Tensor out = Tensor::empty(qkv, dtype, device);
  Tensor lse = Tensor::empty({cfg.b, cfg.h, cfg.t}, DType::f32, device);
  Tensor dq = Tensor::empty(qkv, dtype, device), dk = Tensor::empty(qkv, dtype, device);
  Tensor dv = Tensor::empty(qkv, dtype, device);
  AttentionFwdArgs fwd{.out = out, .lse = lse, .q = q, .k = k, .v = v};
  AttentionBwdArgs bwd{
      .dq = dq, .dk = dk, .dv = dv, .dout = dout, .q = q, .k = k, .v = v, .out = out, .lse = lse};
  std::string label = fmt::format("B={} T={} H={} D={}", cfg.b, cfg.t, cfg.h, cfg.d);
  try {
    double f = median(time_runs(
        device, [&] { ops::attention_fwd(fwd); }, s.warmup, s.repeats));
    double b = median(time_runs(
        device, [&] { ops::attention_bwd(bwd); }, s.warmup, s.repeats));
    double flops_f = op_cost_attention_fwd(fwd).flops, flops_b = op_cost_attention_bwd(bwd).flops;
    double tokens = double(cfg.b * cfg.t);
    fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} |\n", label,
               dtype_name(dtype), f * 1e3, b * 1e3, (f + b) / tokens * 1e6, flops_f / f / 1e9,
               flops_b / b / 1e9, (flops_f + flops_b) / (f + b) / 1e9);
  } catch (const Error& e) {
    fmt::print("| {} | {} | {} | | | | | |\n", label, dtype_name(dtype), short_error(e.what()));
  }
}

void attention_table(Device& device, const Settings& s) {
  fmt::print("## Causal attention forward + backward (median of {})\n\n", s.repeats);
  fmt::print(
      "| shape | dtype | fwd ms | bwd ms | fwd+bwd us/token | fwd GFLOP/s | bwd GFLOP/s |"
      " fwd+bwd GFLOP/s |\n");
  fmt::print("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (AttentionConfig cfg : {AttentionConfig{8, 128, 4, 32}, AttentionConfig{2, 256, 12, 64},
                              AttentionConfig{1, 2048, 12, 64}})
    for (DType dtype : {DType::f32, DType::bf16}) attention_row(device, cfg, dtype, s);
  fmt::print(
      "\nFLOPs from op_cost (causal: T(T+1)/2 query-key pairs; fwd 4D, bwd 10D per pair).\n");
}

// ns per value of one encode call over n values (normal, sigma 2, times 1.5), repeated so that a
// timed call covers at least 2^21 values.
double encode_ns(lowp::Format f, bool stochastic, lowp::EncodePath path, int64_t n,
                 const Settings& s) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> in(static_cast<size_t>(n));
  for (float& v : in) v = normal(rng);
  std::vector<uint8_t> out(static_cast<size_t>(n));
  const int64_t calls = std::max<int64_t>(1, (int64_t(1) << 21) / n);
  auto once = [&] {
    lowp::EncodeStats stats{.track_amax = false};
    for (int64_t c = 0; c < calls; ++c) {
      if (stochastic) {
        lowp::encode_stochastic_n(f, in.data(), n, 1.5f, 7, uint64_t(c * n), out.data(),
                                  lowp::Overflow::saturate, &stats, path);
      } else {
        lowp::encode_n(f, in.data(), n, 1.5f, out.data(), lowp::Overflow::saturate, &stats, path);
      }
    }
  };
  for (int i = 0; i < s.warmup; ++i) once();
  std::vector<double> ns;
  for (int i = 0; i < s.repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    const std::chrono::duration<double, std::nano> t = std::chrono::steady_clock::now() - t0;
    ns.push_back(t.count() / double(calls * n));
  }
  return median(ns);
}

void encoder_table(const Settings& s) {
  fmt::print("## Low-precision batch encoders, one thread (ns per value, median of {})\n\n",
             s.repeats);
  fmt::print("| format | rounding | values | fastest path | portable loops |\n");
  fmt::print("|---|---|---:|---:|---:|\n");
  for (int64_t n : {int64_t(8199), int64_t(704512)})
    for (lowp::Format f : {lowp::Format::e4m3, lowp::Format::e2m1})
      for (bool stochastic : {false, true})
        fmt::print("| {} | {} | {} | {:.3f} | {:.3f} |\n", lowp::format_info(f).name,
                   stochastic ? "stochastic" : "nearest even", n,
                   encode_ns(f, stochastic, lowp::EncodePath::fastest, n, s),
                   encode_ns(f, stochastic, lowp::EncodePath::portable, n, s));
  fmt::print(
      "\n8,199 values stay in L1; 704,512 are a gate projection's dy (1,024 x 688). The fastest "
      "path is core/lowp/encode_avx512.cpp where the CPU has AVX512F/BW/DQ/VL, else "
      "core/lowp/encode_avx2.cpp where it has AVX2 (H2_CPU_MAX_ISA=avx2 forces it), else the "
      "portable loops.\n");
}

bool wants(const Settings& s, const std::string& section) {
  return std::find(s.sections.begin(), s.sections.end(), section) != s.sections.end();
}

int run(const Settings& s, int threads) {
  RuntimeOptions options = RuntimeOptions::from_env();
  options.cpu.threads = threads;
  auto runtime = create_runtime(options);
  Device& cpu = runtime->cpu();
  fmt::print("# H2 CPU kernel benchmark\n\n");
  // H2_CPU_MAX_ISA picks the path of H2's own kernels (attention's tiles among them) and oneDNN's.
  fmt::print("device: {} ({}); H2_CPU_MAX_ISA {}, OPENBLAS_CORETYPE {}, OPENBLAS_L2_SIZE {}\n\n",
             cpu.str(), cpu.props().name, env_or_unset("H2_CPU_MAX_ISA"),
             env_or_unset("OPENBLAS_CORETYPE"), env_or_unset("OPENBLAS_L2_SIZE"));
  double peak = s.peak_gflops;
  if (peak <= 0 && wants(s, "peak")) peak = measure_peak(cpu, s);
  if (wants(s, "gemm")) gemm_table(cpu, s, peak);
  if (wants(s, "attention")) attention_table(cpu, s);
  if (wants(s, "encoders")) encoder_table(s);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace h2::bench

int main(int argc, char** argv) {
  h2::bench::Settings s;
  int threads = 0;
  CLI::App app{
      "Throughput of H2's CPU kernels (GEMM peak, training-step GEMMs, attention, FP8/FP4 "
      "encoders)",
      "h2_bench_kernels"};
  app.add_option("--repeats", s.repeats, "Timed calls per figure (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", s.warmup, "Untimed calls before timing")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: every core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--peak-repeats", s.peak_repeats, "Calls per peak GEMM (best reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--peak-gflops", s.peak_gflops, "Use this peak instead of measuring it");
  app.add_option("--gemm-dtype", s.gemm_dtype, "Storage dtype of the step GEMMs")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--sections", s.sections, "Which tables: peak, gemm, attention, encoders")
      ->check(CLI::IsMember({"peak", "gemm", "attention", "encoders"}))
      ->delimiter(',')
      ->capture_default_str();
  return h2::bench::parse_and_run(app, argc, argv, [&] { return h2::bench::run(s, threads); });
}
