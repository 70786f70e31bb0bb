// Parameter creation (host-side deterministic init) and the matmul patterns of a linear layer.
#include "models/layers/param.h"

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::models {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1) from 53 random bits; never 0, so log() below is finite.
double uniform01(uint64_t bits) {
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

uint64_t name_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return splitmix64(seed ^ h);
}

Param make_param(std::string name, const Shape& shape, Init init, float std, uint64_t seed,
                 DType dtype, Device& device) {
  const int64_t n = shape.numel();
  std::vector<float> host(size_t(n), 1.0f);
  if (init == Init::normal) {
    // Box-Muller on a counter-based stream: element i depends only on (seed, name, i).
    const uint64_t key = name_key(seed, name);
    const double two_pi = 6.283185307179586;
    for (int64_t i = 0; i < n; i += 2) {
      double u1 = uniform01(splitmix64(key + 2 * uint64_t(i)));
      double u2 = uniform01(splitmix64(key + 2 * uint64_t(i) + 1));
      double r = std::sqrt(-2.0 * std::log(u1)) * std;
      host[size_t(i)] = float(r * std::cos(two_pi * u2));
      if (i + 1 < n) host[size_t(i + 1)] = float(r * std::sin(two_pi * u2));
    }
  }
  Param p;
  p.name = std::move(name);
  p.value = tensor_from_floats(host, shape, dtype, device);
  p.grad = Tensor::zeros(shape, DType::f32, device);
  return p;
}

void linear_fwd(const Tensor& out, const Tensor& x, const Param& w) {
  ops::matmul({.out = out, .a = x, .b = w.value, .trans_b = true});
}

void linear_bwd(const Tensor& dx, const Tensor& dy, const Tensor& x, Param& w, bool accumulate_dx) {
  ops::matmul({.out = dx, .a = dy, .b = w.value, .beta = accumulate_dx ? 1.0f : 0.0f});
  accumulate_weight_grad(w.grad, dy, x);
}

void accumulate_weight_grad(const Tensor& grad, const Tensor& dy, const Tensor& x) {
  // f32 grad, f32 or bf16/f16 dy and x: the FP32 sums land in grad without a 16-bit rounding.
  ops::matmul({.out = grad, .a = dy, .b = x, .trans_a = true, .beta = 1});
}

void accumulate_into(const Tensor& grad, const Tensor& g) {
  Tensor g32 = g;
  if (g.dtype() != grad.dtype()) {
    g32 = Tensor::empty(g.shape(), grad.dtype(), grad.device());
    ops::copy({.out = g32, .in = g});
  }
  ops::add({.out = grad, .a = grad, .b = g32});
}

}  // namespace h2::models
