// Rotary position embedding, Hugging Face rotate_half layout (pairs i and i + D/2). The cos/sin
// tables (T x D/2), made in double and rounded to float, come from the device's cache
// (rope_tables.h); the rotation itself is FP32. rope_bwd rotates by the negated angle (the
// transposed rotation). Each pair is read before it is written, so out may alias x.
#include <algorithm>

#include "backends/cpu/kernel_context.h"
#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/rope_tables.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

// x, out: (B, T, H, D); sign +1 rotates by +angle (forward), -1 by -angle (backward).
void rope(const RopeArgs& args, Stream& stream, const char* op, float sign) {
  const Tensor& xt = args.x;
  H2_CHECK(xt.defined(), "{}: x is undefined", op);
  H2_CHECK(xt.rank() == 4, "{}: x {} must be (B, T, H, D)", op, xt.shape().str());
  check_same_shape(op, args.out, "out", xt, "x");
  const int64_t seq = xt.size(1), heads = xt.size(2), dim = xt.size(3), half = dim / 2;
  H2_CHECK(dim % 2 == 0, "{}: head dim D={} of x {} must be even", op, dim, xt.shape().str());
  H2_CHECK(args.theta > 0, "{}: theta {} must be positive", op, args.theta);
  const int64_t rows = xt.numel() / std::max<int64_t>(dim, 1);
  if (xt.numel() == 0) return;
  const FloatIn x(xt, op, "x");
  const FloatOut out(args.out, op, "out");

  const std::shared_ptr<const RopeTable> table =
      kernel_context(stream).rope_tables().get({.seq = seq,
                                                .dim = dim,
                                                .offset = args.position_offset,
                                                .theta = double(args.theta),
                                                .scaling = args.scaling});
  const float *cos_t = table->cos_t.data(), *sin_t = table->sin_t.data();

  // Rows whose time step is t take row t of the tables (rows run over (B, T, H)); sign * sin is
  // exact, so both directions share one table.
  auto rotate = [&](const float* lo, const float* hi, float* olo, float* ohi, int64_t row,
                    int64_t c, int64_t len) {
    const int64_t t = (row / heads) % seq;
    const float* cs = cos_t + t * half + c;
    const float* sn = sin_t + t * half + c;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      const float a = lo[i], b = hi[i];  // both halves read before either is written
      const float s = sign * sn[i];
      olo[i] = a * cs[i] - b * s;
      ohi[i] = b * cs[i] + a * s;
    }
  };
  // Whole rows a chunk at a time where they fit (a head's row is short: D = 32 or 128), so that
  // a 16-bit tensor is widened and rounded in one call per chunk rather than four per row; a row
  // longer than a chunk goes by chunks of its halves.
  const int64_t rows_per_chunk = kChunk / dim;
  parallel_for(rows, 2 * dim, [&](int64_t r0, int64_t r1) {
    float in_buf[kChunk], out_buf[kChunk];
    if (rows_per_chunk > 0) {
      for (int64_t r = r0; r < r1; r += rows_per_chunk) {
        const int64_t n = std::min(rows_per_chunk, r1 - r), at = r * dim;
        const float* in = x.read(at, n * dim, in_buf);
        float* o = out.target(at, out_buf);
        for (int64_t j = 0; j < n; ++j)
          rotate(in + j * dim, in + j * dim + half, o + j * dim, o + j * dim + half, r + j, 0,
                 half);
        out.commit(at, n * dim, o);
      }
      return;
    }
    constexpr int64_t kPart = kChunk / 2;  // pairs (c + i, half + c + i), both halves in the buffer
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < half; c += kPart) {
        const int64_t len = std::min(kPart, half - c), lo_at = r * dim + c, hi_at = lo_at + half;
        const float* lo = x.read(lo_at, len, in_buf);
        const float* hi = x.read(hi_at, len, in_buf + kPart);
        float* olo = out.target(lo_at, out_buf);
        float* ohi = out.target(hi_at, out_buf + kPart);
        rotate(lo, hi, olo, ohi, r, c, len);
        out.commit(lo_at, len, olo);
        out.commit(hi_at, len, ohi);
      }
    }
  });
}

}  // namespace

// x: (B, T, H, D) -> out: (B, T, H, D) rotated by (position_offset + t) * theta^(-2i/D).
void rope_fwd(const RopeArgs& args, Stream& stream) {
  rope(args, stream, "rope_fwd", 1.0f);
}

// dout: (B, T, H, D) (args.x) -> dx: (B, T, H, D) (args.out), the inverse rotation.
void rope_bwd(const RopeArgs& args, Stream& stream) {
  rope(args, stream, "rope_bwd", -1.0f);
}

}  // namespace h2::cpu
