// One AdamW step on FP32 master state (param, m, v), the formula of core/op_args.h term by term in
// FP32, with the bias corrections 1 - beta^step computed in double. grad may be f32, bf16 or f16;
// the optional param_copy receives the updated param rounded to its own dtype.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_math.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

// param, m, v: (N...) f32, grad: (N...) -> param, m, v updated; param_copy: (N...) optional.
void adamw(const AdamwArgs& args, Stream&) {
  const char* op = "adamw";
  H2_CHECK(args.param.defined(), "{}: param is undefined", op);
  check_same_shape(op, args.m, "m", args.param, "param");
  check_same_shape(op, args.v, "v", args.param, "param");
  check_same_shape(op, args.grad, "grad", args.param, "param");
  check_f32(args.param, op, "param");
  check_f32(args.m, op, "m");
  check_f32(args.v, op, "v");
  const bool has_copy = args.param_copy.defined();
  if (has_copy) check_same_shape(op, args.param_copy, "param_copy", args.param, "param");
  H2_CHECK(args.step >= 1, "{}: step {} must be >= 1", op, args.step);
  const FloatIn grad(args.grad, op, "grad");
  // A placeholder FloatOut over param when there is no copy: never committed.
  const FloatOut param_copy(has_copy ? args.param_copy : args.param, op, "param_copy");
  float* param = static_cast<float*>(args.param.data());
  float* m = static_cast<float*>(args.m.data());
  float* v = static_cast<float*>(args.v.data());

  const float b1 = args.beta1, b2 = args.beta2, lr = args.lr, eps = args.eps;
  const float wd = args.weight_decay, scale = args.grad_scale;
  const float bc1 = float(1.0 - std::pow(double(b1), double(args.step)));
  const float bc2 = float(1.0 - std::pow(double(b2), double(args.step)));
  parallel_chunks_fastest(args.param.numel(), kChunk, 6, [=](int64_t begin, int64_t n) {
    float g_buf[kChunk], root[kChunk];
    const float* g = grad.read(begin, n, g_buf);
    float *p = param + begin, *mc = m + begin, *vc = v + begin;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale;
      mc[i] = b1 * mc[i] + (1.0f - b1) * gi;
      vc[i] = b2 * vc[i] + (1.0f - b2) * (gi * gi);
      root[i] = vc[i] / bc2;
    }
    sqrt_f32(root, n, root);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float pi = p[i];
      p[i] = pi - lr * ((mc[i] / bc1) / (root[i] + eps) + wd * pi);
    }
    if (has_copy) param_copy.commit(begin, n, p);
  });
}

}  // namespace h2::cpu
