// Prints one line per (kernel, dtype, shape): the XXH3-64 hash of the bits of every output of
// the CPU kernels whose parallel ranges run in in_fastest_build (RMSNorm, cross-entropy, AdamW,
// add; backends/cpu/kernels/cpu_parallel.h) or whose row loops do (SwiGLU, wide_rows.h), on fixed
// pseudo-random inputs.
// same_bits_across_paths.sh runs it natively and with H2_CPU_MAX_ISA=avx2 and expects the same
// lines: the x86-64-v4 build of those loops and the default one give the same bits (their sums run
// in a fixed order, and both builds contract to FMAs), and so do the AVX-512 and AVX2 bf16 stores.
// Shapes: rows of one chunk of channels (96) and of two (1500 > kChunk), enough rows for two
// threads.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "backends/registry.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::test {
namespace {

class Dump {
 public:
  explicit Dump(Device& cpu) : cpu_(cpu) {}

  // The kernels on rows x channels inputs stored as dtype.
  void run(DType dtype, int64_t rows, int64_t channels) {
    const Shape matrix{rows, channels}, vector{channels};
    Tensor x = input(matrix, dtype, -2, 2), dout = input(matrix, dtype, -1, 1);
    Tensor weight = input(vector, dtype, 0.5f, 1.5f);

    Tensor out = empty(matrix, dtype), rstd = empty({rows}, DType::f32);
    ops::rms_norm_fwd({.out = out, .rstd = rstd, .x = x, .weight = weight});
    print("rms_norm_fwd", dtype, matrix, {out, rstd});
    Tensor dx = empty(matrix, dtype), dweight = empty(vector, dtype);
    ops::rms_norm_bwd(
        {.dx = dx, .dweight = dweight, .dout = dout, .x = x, .weight = weight, .rstd = rstd});
    print("rms_norm_bwd", dtype, matrix, {dx, dweight});

    Tensor sum = empty(matrix, dtype);
    ops::add({.out = sum, .a = x, .b = dout, .alpha = 0.75f, .beta = -1.25f});
    print("add", dtype, matrix, {sum});

    Tensor gated = empty(matrix, dtype);
    ops::swiglu_fwd({.out = gated, .gate = x, .up = dout});
    Tensor dgate = empty(matrix, dtype), dup = empty(matrix, dtype);
    ops::swiglu_bwd({.dgate = dgate, .dup = dup, .dout = fresh_like(x), .gate = x, .up = dout});
    print("swiglu", dtype, matrix, {gated, dgate, dup});

    std::vector<int64_t> targets(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) targets[size_t(r)] = (r * 37) % channels;
    targets[0] = -100;  // an ignored row
    Tensor target_ids = tensor_from_ints(targets, {rows}, DType::i64, cpu_);
    Tensor logits = input(matrix, dtype, -8, 8);
    Tensor losses = empty({rows}, DType::f32), lse = empty({rows}, DType::f32);
    ops::cross_entropy_fwd({.losses = losses, .lse = lse, .logits = logits, .targets = target_ids});
    Tensor dlogits = empty(matrix, dtype);
    ops::cross_entropy_bwd({.dlogits = dlogits,
                            .logits = logits,
                            .lse = lse,
                            .targets = target_ids,
                            .dloss = 1.0f / float(rows)});
    print("cross_entropy", dtype, matrix, {losses, lse, dlogits});

    Tensor param = input(matrix, DType::f32, -1, 1), m = input(matrix, DType::f32, -0.1f, 0.1f);
    Tensor v = input(matrix, DType::f32, 0, 0.01f), param_copy = empty(matrix, dtype);
    ops::adamw({.param = param,
                .m = m,
                .v = v,
                .param_copy = dtype == DType::f32 ? Tensor() : param_copy,
                .grad = dout,
                .lr = 3e-3f,
                .weight_decay = 0.1f,
                .grad_scale = 0.5f,
                .step = 7});
    std::vector<Tensor> adamw_out{param, m, v};
    if (dtype != DType::f32) adamw_out.push_back(param_copy);
    print("adamw", dtype, matrix, adamw_out);
  }

 private:
  Tensor input(const Shape& shape, DType dtype, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> values(size_t(shape.numel()));
    for (float& value : values) value = dist(rng_);
    return tensor_from_floats(values, shape, dtype, cpu_);
  }
  Tensor empty(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, cpu_); }
  // Fresh values of t's shape and dtype: swiglu_bwd's dout, unlike its gate and up.
  Tensor fresh_like(const Tensor& t) { return input(t.shape(), t.dtype(), -1, 1); }
  static void print(const char* kernel, DType dtype, const Shape& shape,
                    const std::vector<Tensor>& outputs) {
    std::vector<float> values;
    for (const Tensor& t : outputs) {
      const std::vector<float> more = tensor_to_floats(t);
      values.insert(values.end(), more.begin(), more.end());
    }
    const uint64_t hash = XXH3_64bits(values.data(), values.size() * sizeof(float));
    fmt::print("{} {} {} {:016x}\n", kernel, dtype_name(dtype), shape.str(), hash);
  }

  Device& cpu_;
  std::mt19937 rng_{2026};
};

}  // namespace
}  // namespace h2::test

int main() {
  try {
    std::unique_ptr<h2::Runtime> runtime = h2::create_runtime(h2::RuntimeOptions::from_env());
    h2::test::Dump dump(runtime->cpu());
    for (h2::DType dtype : {h2::DType::f32, h2::DType::bf16})
      for (int64_t channels : {96, 1500}) dump.run(dtype, channels == 96 ? 700 : 64, channels);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "same_bits_dump: %s\n", e.what());
    return 1;
  }
}
