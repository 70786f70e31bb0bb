// One AdamW step (decoupled weight decay, bias-corrected) on FP32 master state. Shapes: param,
// m, v, grad, param_copy: (N...), equal. param, m, v are f32; grad f32 or bf16 (any float is
// accepted); param_copy (optional) receives the updated param rounded to its own dtype. The bias
// corrections 1 - beta^step are computed once on the host in double.
#include <cmath>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

struct AdamwScalars {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias1, bias2;  // 1 - beta1^step, 1 - beta2^step
};

__global__ void adamw_kernel(float* param, float* m, float* v, FloatPtr param_copy, FloatPtr grad,
                             AdamwScalars k, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = grad.get(i) * k.grad_scale;
    const float m_new = k.beta1 * m[i] + (1.0f - k.beta1) * g;
    const float v_new = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float update = (m_new / k.bias1) / (sqrtf(v_new / k.bias2) + k.eps);
    const float p = param[i] - k.lr * (update + k.weight_decay * param[i]);
    param[i] = p;
    if (param_copy.data != nullptr) param_copy.set(i, p);
  }
}

}  // namespace

// param, m, v: (N...) f32; grad: (N...) -> param, m, v updated; param_copy: (N...) optional.
void adamw(const AdamwArgs& args, Stream& stream) {
  const char* op = "adamw";
  require_same_shape(args.param, args.grad, op, "param", "grad");
  require_same_shape(args.param, args.m, op, "param", "m");
  require_same_shape(args.param, args.v, op, "param", "v");
  if (args.param_copy.defined())
    require_same_shape(args.param, args.param_copy, op, "param", "param_copy");
  H2_CUDA_REQUIRE(args.step >= 1, str_cat("cuda adamw: step ", args.step, " < 1"));
  float* param = f32_ptr(args.param, op, "param");
  float* m = f32_ptr(args.m, op, "m");
  float* v = f32_ptr(args.v, op, "v");
  const int64_t n = args.param.numel();
  if (n == 0) return;
  const AdamwScalars scalars{args.lr,
                             args.beta1,
                             args.beta2,
                             args.eps,
                             args.weight_decay,
                             args.grad_scale,
                             float(1.0 - std::pow(double(args.beta1), double(args.step))),
                             float(1.0 - std::pow(double(args.beta2), double(args.step)))};
  Launch launch(stream);
  adamw_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
      param, m, v, float_ptr(args.param_copy, op, "param_copy"), float_ptr(args.grad, op, "grad"),
      scalars, n);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
