// Element-wise ops on contiguous tensors: add (out = alpha*a + beta*b) and the SwiGLU pair.
// Shapes: add a, b, out: (any...), equal; swiglu gate, up, out, dgate, dup, dout: (N..., F).
// Operands may have different floating dtypes (FloatPtr); arithmetic is FP32. Each element is
// read before it is written by the same thread, so out may alias a or b (residual adds,
// gradient accumulation). silu uses expf (not __expf) to stay close to the double reference.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

__global__ void add_kernel(FloatPtr out, FloatPtr a, FloatPtr b, float alpha, float beta,
                           int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float value = alpha * a.get(i);
    if (b.data != nullptr) value += beta * b.get(i);
    out.set(i, value);
  }
}

__device__ __forceinline__ float sigmoid(float g) {
  return 1.0f / (1.0f + expf(-g));
}

__global__ void swiglu_fwd_kernel(FloatPtr out, FloatPtr gate, FloatPtr up, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float g = gate.get(i);
    out.set(i, g * sigmoid(g) * up.get(i));
  }
}

// silu'(g) = s + g*s*(1-s) with s = sigmoid(g).
__global__ void swiglu_bwd_kernel(FloatPtr dgate, FloatPtr dup, FloatPtr dout, FloatPtr gate,
                                  FloatPtr up, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float g = gate.get(i), u = up.get(i), d = dout.get(i);
    float s = sigmoid(g);
    dgate.set(i, d * u * (s + g * s * (1.0f - s)));
    dup.set(i, d * g * s);
  }
}

}  // namespace

// out, a, b: (any...) -> out = alpha*a + beta*b (b optional).
void add(const AddArgs& args, Stream& stream) {
  require_same_shape(args.out, args.a, "add", "out", "a");
  if (args.b.defined()) require_same_shape(args.out, args.b, "add", "out", "b");
  const int64_t n = args.out.numel();
  if (n == 0) return;
  Launch launch(stream);
  add_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
      float_ptr(args.out, "add", "out"), float_ptr(args.a, "add", "a"),
      float_ptr(args.b, "add", "b"), args.alpha, args.beta, n);
  H2_CUDA_LAUNCH_CHECK();
}

// gate, up: (N..., F) -> out: (N..., F) = silu(gate) * up.
void swiglu_fwd(const SwigluFwdArgs& args, Stream& stream) {
  require_same_shape(args.out, args.gate, "swiglu_fwd", "out", "gate");
  require_same_shape(args.out, args.up, "swiglu_fwd", "out", "up");
  const int64_t n = args.out.numel();
  if (n == 0) return;
  Launch launch(stream);
  swiglu_fwd_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
      float_ptr(args.out, "swiglu_fwd", "out"), float_ptr(args.gate, "swiglu_fwd", "gate"),
      float_ptr(args.up, "swiglu_fwd", "up"), n);
  H2_CUDA_LAUNCH_CHECK();
}

// dout, gate, up: (N..., F) -> dgate, dup: (N..., F).
void swiglu_bwd(const SwigluBwdArgs& args, Stream& stream) {
  const char* op = "swiglu_bwd";
  require_same_shape(args.dout, args.gate, op, "dout", "gate");
  require_same_shape(args.dout, args.up, op, "dout", "up");
  require_same_shape(args.dout, args.dgate, op, "dout", "dgate");
  require_same_shape(args.dout, args.dup, op, "dout", "dup");
  const int64_t n = args.dout.numel();
  if (n == 0) return;
  Launch launch(stream);
  swiglu_bwd_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
      float_ptr(args.dgate, op, "dgate"), float_ptr(args.dup, op, "dup"),
      float_ptr(args.dout, op, "dout"), float_ptr(args.gate, op, "gate"),
      float_ptr(args.up, op, "up"), n);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
