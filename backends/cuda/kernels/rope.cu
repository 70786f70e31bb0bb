// Rotary position embedding, Hugging Face rotate_half convention. Shapes: x, out (B, T, H, D),
// D even. One thread per rotated pair (i, i + D/2) of one (b, t, h): it reads both elements
// before writing both, so out may alias x. The angle (position_offset + t) * inv_freq_i (plain or
// Llama 3 scaled, core/rope_frequencies.h) and
// its sine and cosine are computed in double: positions reach 10^5 and an FP32 angle would be
// off by ~1e-3 rad there. rope_bwd rotates by -angle (the transpose of the rotation).
#include <cmath>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

__global__ void rope_kernel(FloatPtr out, FloatPtr x, int64_t seq, int64_t heads, int64_t half,
                            double theta, RopeScaling scaling, int64_t position_offset,
                            float direction, int64_t pairs) {
  for (int64_t p = first_index(); p < pairs; p += grid_stride()) {
    const int64_t i = p % half;
    const int64_t row = p / half;  // (b, t, h) flattened
    const int64_t t = (row / heads) % seq;
    const double inv_freq = rope_inv_freq(i, 2 * half, theta, scaling);
    double s, c;
    sincos(double(position_offset + t) * inv_freq, &s, &c);
    const float sin_a = direction * float(s), cos_a = float(c);
    const int64_t lo = row * 2 * half + i, hi = lo + half;
    const float x_lo = x.get(lo), x_hi = x.get(hi);
    out.set(lo, x_lo * cos_a - x_hi * sin_a);
    out.set(hi, x_hi * cos_a + x_lo * sin_a);
  }
}

void rope(const RopeArgs& args, Stream& stream, const char* op, float direction) {
  require_same_shape(args.out, args.x, op, "out", "x");
  H2_CUDA_REQUIRE(args.x.rank() == 4 && args.x.size(3) % 2 == 0,
                  str_cat("cuda ", op, ": x ", args.x.shape().str(), " is not (B, T, H, D even)"));
  H2_CUDA_REQUIRE(args.theta > 0, str_cat("cuda ", op, ": theta ", args.theta));
  const int64_t pairs = args.x.numel() / 2;
  if (pairs == 0) return;
  Launch launch(stream);
  rope_kernel<<<grid_for(pairs), kThreads, 0, launch.stream()>>>(
      float_ptr(args.out, op, "out"), float_ptr(args.x, op, "x"), args.x.size(1), args.x.size(2),
      args.x.size(3) / 2, double(args.theta), args.scaling, args.position_offset, direction, pairs);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace

// x: (B, T, H, D) -> out: (B, T, H, D), rotated by +angle.
void rope_fwd(const RopeArgs& args, Stream& stream) {
  rope(args, stream, "rope_fwd", 1.0f);
}

// dout: (B, T, H, D) as x -> dx: (B, T, H, D) as out, rotated by -angle.
void rope_bwd(const RopeArgs& args, Stream& stream) {
  rope(args, stream, "rope_bwd", -1.0f);
}

}  // namespace h2::cuda
