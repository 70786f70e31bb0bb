// h2_bench_gemm_libraries: the GEMM libraries Debian offers, side by side on the GEMMs of H2's
// training steps, to choose the CPU backend's GEMM provider by measurement (issue 18):
//   openblas  cblas_sgemm (Debian's OpenMP build, what the CPU backend used first)
//   onednn    dnnl::matmul f32, a primitive made once per shape (creation time reported apart)
//   xsmm      libxsmm JIT kernels, f32; rows of C split over the OpenMP threads (n/a: no kernel,
//             e.g. for a transposed b, or an extent past 8,192)
//   onednn bf16  bf16 x bf16 -> f32 (only where oneDNN has a bf16 kernel for this CPU)
//   widen+sgemm  what a bf16 GEMM costs by widening both operands to f32 first
// Shapes (row-major, weights stored (out, in) as in PyTorch): for every linear of a step
// Y = X W^T (fwd), dX = dY W (dX), dW = dY^T X (dW); tokens = batch x sequence.
// Every figure is the median GFLOP/s of --repeats timed calls after --warmup untimed ones; each
// result is checked against OpenBLAS's (max |diff| / max |ref|) so a wrong call cannot look fast.
#include <cblas.h>
#include <fmt/format.h>
#include <libxsmm.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dnnl.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Gemm {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// Y = X W^T, dX = dY W, dW = dY^T X for a linear (in -> out) over `tokens` rows.
void add_linear(std::vector<Gemm>& out, const std::string& name, int64_t tokens, int64_t in,
                int64_t outs) {
  out.push_back({name + " fwd", tokens, outs, in, false, true});
  out.push_back({name + " dX", tokens, in, outs, false, false});
  out.push_back({name + " dW", outs, in, tokens, true, false});
}

// The linears of one training step of a Llama shape (q, k, v and o are C x C with as many kv
// heads as heads), alone and fused as q|k|v and gate|up.
std::vector<Gemm> shape_gemms(const std::string& shape) {
  struct Step {
    int64_t tokens, dim, ffn, vocab;
  };
  Step s;
  if (shape == "tiny") {
    s = {8 * 128, 128, 344, 256};
  } else if (shape == "124m") {
    s = {2 * 256, 768, 2048, 50257};
  } else {
    throw std::runtime_error("unknown shape '" + shape + "' (tiny or 124m)");
  }
  std::vector<Gemm> g;
  add_linear(g, "q (or k, v, o)", s.tokens, s.dim, s.dim);
  add_linear(g, "qkv fused", s.tokens, s.dim, 3 * s.dim);
  add_linear(g, "gate (or up)", s.tokens, s.dim, s.ffn);
  add_linear(g, "gate+up fused", s.tokens, s.dim, 2 * s.ffn);
  add_linear(g, "down", s.tokens, s.ffn, s.dim);
  add_linear(g, "lm_head", s.tokens, s.dim, s.vocab);
  return g;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

uint16_t to_bf16(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(src[i]) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

double median_seconds(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> s;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

void sgemm(const Gemm& g, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, int(g.m), int(g.n), int(g.k), 1.0f, a,
              int(g.trans_a ? g.m : g.k), b, int(g.trans_b ? g.k : g.n), 0.0f, c, int(g.n));
}

// oneDNN: row-major operands as strided memory descriptors (a transposed operand is the same
// buffer with swapped strides).
struct OneDnnGemm {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
  double create_ms = 0;
};

std::optional<OneDnnGemm> make_onednn(const dnnl::engine& engine, const Gemm& g,
                                      dnnl::memory::data_type in_type, void* a, void* b, float* c) {
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md({g.m, g.k}, in_type, g.trans_a ? dims{1, g.m} : dims{g.k, 1});
  const dnnl::memory::desc b_md({g.k, g.n}, in_type, g.trans_b ? dims{1, g.k} : dims{g.n, 1});
  const dnnl::memory::desc c_md({g.m, g.n}, dnnl::memory::data_type::f32, dims{g.n, 1});
  const auto t0 = Clock::now();
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    OneDnnGemm r{dnnl::matmul(pd), dnnl::memory(a_md, engine, a), dnnl::memory(b_md, engine, b),
                 dnnl::memory(c_md, engine, c)};
    r.create_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return r;
  } catch (const dnnl::error&) {
    return std::nullopt;  // no kernel for this data type on this CPU
  }
}

// libxsmm is column-major: row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) =
// op(B)^T op(A)^T, i.e. libxsmm's (m, n, k) = (N, rows, K) with A <- b and B <- a, and a
// row-major transpose becomes the other operand's column-major transpose flag.
struct XsmmGemm {
  libxsmm_smmfunction kernel = nullptr;
  int64_t rows_per_block = 0;
};

// libxsmm is for small GEMMs; past this extent (the 124M LM head's 50,257) version 1.17 crashes
// in its fallback instead of declining, so larger ones are not asked.
constexpr int64_t kXsmmLargestExtent = 8192;

XsmmGemm make_xsmm(const Gemm& g, int threads) {
  XsmmGemm x;
  if (std::max({g.m, g.n, g.k}) > kXsmmLargestExtent) return x;
  x.rows_per_block = (g.m + threads - 1) / threads;
  const libxsmm_blasint m = libxsmm_blasint(g.n), n = libxsmm_blasint(x.rows_per_block),
                        k = libxsmm_blasint(g.k);
  const libxsmm_blasint lda = libxsmm_blasint(g.trans_b ? g.k : g.n);
  const libxsmm_blasint ldb = libxsmm_blasint(g.trans_a ? g.m : g.k);
  const libxsmm_blasint ldc = libxsmm_blasint(g.n);
  const float alpha = 1, beta = 0;
  const int flags =
      (g.trans_b ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (g.trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
  x.kernel = libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
  return x;
}

void run_xsmm(const Gemm& g, const XsmmGemm& x, const float* a, const float* b, float* c) {
  const int64_t blocks = (g.m + x.rows_per_block - 1) / x.rows_per_block;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t row = i * x.rows_per_block;
    // The last block may be shorter only when threads do not divide M: the tables' shapes do.
    const float* a_rows = g.trans_a ? a + row : a + row * g.k;
    x.kernel(b, a_rows, c + row * g.n);
  }
}

std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model;
  std::vector<std::string> found;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      for (const char* f : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
        if ((line + " ").find(std::string(" ") + f + " ") != std::string::npos) found.push_back(f);
      break;
    }
  }
  return fmt::format("{} ({})", model, fmt::join(found, " "));
}

std::string gflops_cell(std::optional<double> seconds, double flops) {
  return seconds ? fmt::format("{:.1f}", flops / *seconds / 1e9) : "n/a";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GEMM libraries side by side on H2's training-step GEMMs (issue 18's choice)"};
  std::vector<std::string> shapes = {"tiny", "124m"};
  int repeats = 9, warmup = 2;
  app.add_option("--shapes", shapes, "Step shapes: tiny, 124m")->capture_default_str();
  app.add_option("--repeats", repeats, "Timed calls per figure (median)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed calls first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  libxsmm_init();
  const int threads = omp_get_max_threads();
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl_version_t* v = dnnl_version();
  fmt::print("CPU: {}\nthreads {}, oneDNN {}.{}.{} (ISA {}), libxsmm {}, {}\n\n", cpu_flags(),
             threads, v->major, v->minor, v->patch, int(dnnl::get_effective_cpu_isa()),
             LIBXSMM_VERSION, openblas_get_config());

  for (const std::string& shape : shapes) {
    fmt::print("## {} (GFLOP/s, median of {}; oneDNN primitive creation in ms)\n\n", shape,
               repeats);
    fmt::print(
        "| GEMM | M x N x K | openblas f32 | onednn f32 | xsmm f32 | onednn bf16 | "
        "widen+sgemm bf16 | onednn create ms | max rel err onednn/xsmm/bf16 |\n");
    fmt::print("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (const Gemm& g : shape_gemms(shape)) {
      const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
      std::vector<float> a = random_floats(size_t(g.m * g.k), 1);
      std::vector<float> b = random_floats(size_t(g.k * g.n), 2);
      std::vector<float> want(size_t(g.m * g.n)), got(want.size());
      std::vector<uint16_t> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i) a16[i] = to_bf16(a[i]);
      for (size_t i = 0; i < b.size(); ++i) b16[i] = to_bf16(b[i]);

      const double blas =
          median_seconds([&] { sgemm(g, a.data(), b.data(), want.data()); }, warmup, repeats);

      std::optional<double> dnnl_f32, dnnl_bf16, xsmm;
      std::string errors;
      double create_ms = 0;
      auto time_onednn = [&](OneDnnGemm& p) {
        return median_seconds(
            [&] {
              p.primitive.execute(
                  stream, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
              stream.wait();
            },
            warmup, repeats);
      };
      if (auto p = make_onednn(engine, g, dnnl::memory::data_type::f32, a.data(), b.data(),
                               got.data())) {
        create_ms = p->create_ms;
        dnnl_f32 = time_onednn(*p);
        errors += fmt::format("{:.0e}", relative_error(got, want));
      } else {
        errors += "-";
      }
      if (XsmmGemm x = make_xsmm(g, threads); x.kernel) {
        std::fill(got.begin(), got.end(), 0.0f);
        auto run = [&] { run_xsmm(g, x, a.data(), b.data(), got.data()); };
        xsmm = median_seconds(run, warmup, repeats);
        errors += fmt::format(" / {:.0e}", relative_error(got, want));
      } else {
        errors += " / -";
      }
      if (auto p = make_onednn(engine, g, dnnl::memory::data_type::bf16, a16.data(), b16.data(),
                               got.data())) {
        dnnl_bf16 = time_onednn(*p);
        errors += fmt::format(" / {:.0e}", relative_error(got, want));
      } else {
        errors += " / -";
      }
      std::vector<float> a32(a.size()), b32(b.size());
      const double widen = median_seconds(
          [&] {
            widen_bf16(a16.data(), a32.data(), int64_t(a16.size()));
            widen_bf16(b16.data(), b32.data(), int64_t(b16.size()));
            sgemm(g, a32.data(), b32.data(), got.data());
          },
          warmup, repeats);

      fmt::print("| {} | {} x {} x {}{}{} | {:.1f} | {} | {} | {} | {:.1f} | {:.2f} | {} |\n",
                 g.name, g.m, g.n, g.k, g.trans_a ? " (A^T)" : "", g.trans_b ? " (B^T)" : "",
                 flops / blas / 1e9, gflops_cell(dnnl_f32, flops), gflops_cell(xsmm, flops),
                 gflops_cell(dnnl_bf16, flops), flops / widen / 1e9, create_ms, errors);
    }
    fmt::print("\n");
  }
  libxsmm_finalize();
  return 0;
}
