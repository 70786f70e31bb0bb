// h2_bench_vchip: checks virtual-chip pacing. Two chips, identical except that "slow" has a
// quarter of "fast"'s f32 peak, run the same GEMM (default 1024^3 f32, peaks low enough that the
// modelled time dwarfs the CPU's real time); the median times should differ by ~4x and match
// (flops / peak + bytes / bandwidth) * time_scale. Both chips run cpu:0's kernels, so their
// results must be byte-identical to cpu:0's; the benchmark compares the bytes.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "backends/registry.h"
#include "bench/bench_common.h"
#include "bench/bench_main.h"
#include "core/error.h"
#include "core/op_cost.h"
#include "core/ops.h"

namespace h2::bench {
namespace {

struct Settings {
  int repeats = 5;
  int64_t size = 1024;
  double fast_gflops = 8;  // f32 peak of "fast"; "slow" gets a quarter
  double time_scale = 1;
  int threads = 0;
};

std::string chip_yaml(const Settings& s) {
  auto chip = [](const char* name, double f32_peak) {
    return fmt::format(
        "  - name: {}\n"
        "    memory: 1GiB\n"
        "    memory_bandwidth: 100e9\n"
        "    link_bandwidth: 100e9\n"
        "    peak_flops: {{f32: {:g}, bf16: {:g}}}\n"
        "    dtypes: [f32, bf16, i32, i64, u8]\n",
        name, f32_peak, 2 * f32_peak);
  };
  return "chips:\n" + chip("fast", s.fast_gflops * 1e9) + chip("slow", s.fast_gflops * 1e9 / 4);
}

struct Run {
  double seconds = 0;
  std::vector<std::byte> result;
};

// Median time of the GEMM on `device`, inputs copied there from host values; also its output.
Run run_gemm(Device& device, const Settings& s, const MatmulArgs& host_args) {
  MatmulArgs args{.out = Tensor::empty(host_args.out.shape(), DType::f32, device),
                  .a = host_args.a.to(device),
                  .b = host_args.b.to(device)};
  Run r;
  r.seconds = median(time_runs(
      device, [&] { ops::matmul(args); }, 1, s.repeats));
  r.result = raw_bytes(args.out);
  return r;
}

// Attention forward on `device` (a second op family for the byte comparison).
std::vector<std::byte> run_attention(Device& device, const Tensor& q, const Tensor& k,
                                     const Tensor& v) {
  Tensor out = Tensor::empty(q.shape(), q.dtype(), device);
  Tensor lse = Tensor::empty({q.size(0), q.size(2), q.size(1)}, DType::f32, device);
  ops::attention_fwd(
      {.out = out, .lse = lse, .q = q.to(device), .k = k.to(device), .v = v.to(device)});
  std::vector<std::byte> bytes = raw_bytes(out), lse_bytes = raw_bytes(lse);
  bytes.insert(bytes.end(), lse_bytes.begin(), lse_bytes.end());
  return bytes;
}

const char* same(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0 ? "identical"
                                                                                : "DIFFERENT";
}

int run(const Settings& s) {
  RuntimeOptions options = RuntimeOptions::from_env();
  options.cpu.threads = s.threads;
  options.chips = vchip::parse_chip_specs(chip_yaml(s), "h2_bench_vchip inline chips");
  options.vchip_time_scale = s.time_scale;
  auto runtime = create_runtime(options);
  Device& cpu = runtime->device("cpu:0");
  Device& fast = runtime->device("vchip:fast");
  Device& slow = runtime->device("vchip:slow");

  int64_t n = s.size;
  Tensor a = random_tensor({n, n}, DType::f32, cpu, 1),
         b = random_tensor({n, n}, DType::f32, cpu, 2);
  MatmulArgs host{.out = Tensor::empty({n, n}, DType::f32, cpu), .a = a, .b = b};
  OpCost cost = op_cost_matmul(host);

  fmt::print("# H2 virtual-chip pacing benchmark\n\n");
  fmt::print(
      "GEMM {0} x {0} x {0} f32: {1:.3f} GFLOP, {2:.1f} MB; time_scale {3:g}; median of {4}"
      "\n\n",
      n, cost.flops / 1e9, cost.bytes / 1e6, s.time_scale, s.repeats);
  fmt::print("| device | f32 peak GFLOP/s | modelled ms | measured ms |\n|---|---:|---:|---:|\n");
  Run on_cpu = run_gemm(cpu, s, host);
  fmt::print("| cpu:0 (real) | - | - | {:.2f} |\n", on_cpu.seconds * 1e3);
  Run runs[2];
  Device* chips[2] = {&fast, &slow};
  for (int i = 0; i < 2; ++i) {
    double peak = chips[i]->props().peak(DType::f32);
    double modelled =
        (cost.flops / peak + cost.bytes / chips[i]->props().memory_bandwidth) * s.time_scale;
    runs[i] = run_gemm(*chips[i], s, host);
    fmt::print("| {} ({}) | {:.2f} | {:.2f} | {:.2f} |\n", chips[i]->str(), chips[i]->props().name,
               peak / 1e9, modelled * 1e3, runs[i].seconds * 1e3);
  }
  fmt::print(
      "\nslow / fast time ratio: {:.3f} (peak ratio 4; bytes/bandwidth term makes it"
      " slightly less)\n\n",
      runs[1].seconds / runs[0].seconds);
  fmt::print("GEMM output vs cpu:0: fast {}, slow {}\n", same(runs[0].result, on_cpu.result),
             same(runs[1].result, on_cpu.result));
  try {
    Shape qkv{1, 256, 4, 64};
    Tensor q = random_tensor(qkv, DType::f32, cpu, 3), k = random_tensor(qkv, DType::f32, cpu, 4);
    Tensor v = random_tensor(qkv, DType::f32, cpu, 5);
    auto ref = run_attention(cpu, q, k, v);
    fmt::print("attention_fwd (1, 256, 4, 64) output+lse vs cpu:0: fast {}, slow {}\n",
               same(run_attention(fast, q, k, v), ref), same(run_attention(slow, q, k, v), ref));
  } catch (const Error& e) {
    fmt::print("attention_fwd comparison skipped: {}\n", e.what());
  }
  bool identical = runs[0].result == on_cpu.result && runs[1].result == on_cpu.result;
  std::fflush(stdout);
  return identical ? 0 : 1;
}

}  // namespace
}  // namespace h2::bench

int main(int argc, char** argv) {
  h2::bench::Settings s;
  CLI::App app{"Virtual-chip pacing: the same GEMM on two chips whose f32 peaks differ 4x",
               "h2_bench_vchip"};
  app.add_option("--repeats", s.repeats, "Timed calls per chip (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--size", s.size, "GEMM extent M = N = K")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--fast-gflops", s.fast_gflops, "f32 peak of the fast chip (slow: a quarter)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--time-scale", s.time_scale, "Multiplies every modelled kernel time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", s.threads, "CPU threads (0: every core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  return h2::bench::parse_and_run(app, argc, argv, [&] { return h2::bench::run(s); });
}
