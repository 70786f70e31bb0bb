// RMSNorm forward and backward over the last dim. Row statistics (mean of squares, the backward
// dot product) accumulate in double; dweight sums rows in fixed blocks of rows whose double partial
// sums are added in block order, so results do not depend on the thread count. x, out, dx, dout,
// weight and dweight may each be f32, bf16 or f16; rstd is f32.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_math.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

// Checks x (N..., C), weight (C) and rstd (N...) f32; returns N (rows).
int64_t check_rms_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& rstd) {
  H2_CHECK(x.defined() && weight.defined() && rstd.defined(), "{}: x, weight, rstd must be defined",
           op);
  H2_CHECK(x.rank() >= 1, "{}: x {} has no channel dim", op, x.shape().str());
  const int64_t channels = x.size(-1);
  H2_CHECK(weight.rank() == 1 && weight.size(0) == channels, "{}: weight {} but x {} has C={}", op,
           weight.shape().str(), x.shape().str(), channels);
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.rank(); ++d) rows *= x.size(d);
  H2_CHECK(rstd.numel() == rows, "{}: rstd {} but x {} has {} rows", op, rstd.shape().str(),
           x.shape().str(), rows);
  check_f32(rstd, op, "rstd");
  return rows;
}

// The weight as contiguous floats.
void weight_floats(const FloatIn& weight, int64_t channels, float* dst) {
  float buf[kChunk];
  for (int64_t c = 0; c < channels; c += kChunk) {
    int64_t len = std::min(kChunk, channels - c);
    std::copy_n(weight.read(c, len, buf), len, dst + c);
  }
}

}  // namespace

// x: (N..., C), weight: (C) -> out: (N..., C), rstd: (N...) f32.
void rms_norm_fwd(const RmsNormFwdArgs& args, Stream& stream) {
  const char* op = "rms_norm_fwd";
  const int64_t rows = check_rms_norm(op, args.x, args.weight, args.rstd);
  check_same_shape(op, args.out, "out", args.x, "x");
  const int64_t channels = args.x.size(-1);
  if (rows == 0) return;
  const FloatIn x(args.x, op, "x");
  const FloatOut out(args.out, op, "out");
  ScratchBuffer<float> weight_buf(stream, size_t(channels));
  const float* w = weight_buf.data();
  weight_floats(FloatIn(args.weight, op, "weight"), channels, weight_buf.data());
  float* rstd = static_cast<float*>(args.rstd.data());
  const double eps = args.eps;
  parallel_for_fastest(rows, 2 * channels, [=](int64_t r0, int64_t r1) {
    float x_buf[kChunk], o_buf[kChunk];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t row = r * channels;
      double squares = 0;
      const float* xc = nullptr;
      for (int64_t c = 0; c < channels; c += kChunk) {
        int64_t len = std::min(kChunk, channels - c);
        xc = x.read(row + c, len, x_buf);
        squares += dot_f64(xc, xc, len);
      }
      const double mean = channels > 0 ? squares / double(channels) : 0.0;
      const float rs = float(1.0 / std::sqrt(mean + eps));
      rstd[r] = rs;
      for (int64_t c = 0; c < channels; c += kChunk) {
        int64_t len = std::min(kChunk, channels - c);
        if (channels > kChunk) xc = x.read(row + c, len, x_buf);  // one chunk: xc still has it
        float* o = out.target(row + c, o_buf);
        const float* wc = w + c;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = xc[i] * rs * wc[i];
        out.commit(row + c, len, o);
      }
    }
  });
}

// dout, x: (N..., C), weight: (C), rstd: (N...) f32 -> dx: (N..., C), dweight: (C).
//   dx = rstd * (dout*weight) - x * rstd^3 / C * sum_c(dout*weight*x)
//   dweight (+)= sum over rows of dout * x * rstd
void rms_norm_bwd(const RmsNormBwdArgs& args, Stream& stream) {
  const char* op = "rms_norm_bwd";
  const int64_t rows = check_rms_norm(op, args.x, args.weight, args.rstd);
  check_same_shape(op, args.dout, "dout", args.x, "x");
  check_same_shape(op, args.dx, "dx", args.x, "x");
  check_same_shape(op, args.dweight, "dweight", args.weight, "weight");
  const int64_t channels = args.x.size(-1);
  if (channels == 0) return;
  const FloatIn x(args.x, op, "x"), dout(args.dout, op, "dout");
  const FloatIn dweight_in(args.dweight, op, "dweight");
  const FloatOut dx(args.dx, op, "dx"), dweight(args.dweight, op, "dweight");
  ScratchBuffer<float> weight_buf(stream, size_t(channels));
  const float* w = weight_buf.data();
  weight_floats(FloatIn(args.weight, op, "weight"), channels, weight_buf.data());
  const float* rstd = rows > 0 ? static_cast<const float*>(args.rstd.data()) : nullptr;

  // Rows per dweight partial: a function of the row count only (thread-count independent).
  const int64_t block_rows = std::max<int64_t>(8, ceil_div(rows, 128));
  const int64_t blocks = ceil_div(rows, block_rows);
  ScratchBuffer<double> partial_buf(stream, size_t(blocks * channels));
  double* partial = partial_buf.data();
  parallel_for_fastest(blocks, 4 * block_rows * channels, [=](int64_t b0, int64_t b1) {
    float x_buf[kChunk], d_buf[kChunk], g_buf[kChunk], o_buf[kChunk];
    for (int64_t b = b0; b < b1; ++b) {
      double* part = partial + b * channels;
      std::fill_n(part, channels, 0.0);
      for (int64_t r = b * block_rows; r < std::min(rows, (b + 1) * block_rows); ++r) {
        const int64_t row = r * channels;
        const float rs = rstd[r];
        double dot = 0;  // sum_c dout * weight * x
        const float *xc = nullptr, *dc = nullptr;
        for (int64_t c = 0; c < channels; c += kChunk) {
          int64_t len = std::min(kChunk, channels - c);
          xc = x.read(row + c, len, x_buf);
          dc = dout.read(row + c, len, d_buf);
#pragma omp simd
          for (int64_t i = 0; i < len; ++i) g_buf[i] = dc[i] * w[c + i];
          dot += dot_f64(g_buf, xc, len);
        }
        const float k = float(double(rs) * rs * rs * dot / double(channels));
        for (int64_t c = 0; c < channels; c += kChunk) {
          int64_t len = std::min(kChunk, channels - c);
          if (channels > kChunk) {  // one chunk: xc and dc still have it
            xc = x.read(row + c, len, x_buf);
            dc = dout.read(row + c, len, d_buf);
          }
          float* o = dx.target(row + c, o_buf);
          double* pc = part + c;
          const float* wc = w + c;
#pragma omp simd
          for (int64_t i = 0; i < len; ++i) {
            float xv = xc[i], dv = dc[i];  // read before dx (which may alias dout) is written
            pc[i] += double(dv * xv * rs);
            o[i] = rs * (dv * wc[i]) - xv * k;
          }
          dx.commit(row + c, len, o);
        }
      }
    }
  });

  // dweight: the block partials added in block order, per column chunk.
  parallel_chunks(channels, kChunk, blocks, [&](int64_t c, int64_t len) {
    double acc[kChunk];
    float buf[kChunk];
    if (args.accumulate) {
      const float* old = dweight_in.read(c, len, buf);
      for (int64_t i = 0; i < len; ++i) acc[i] = old[i];
    } else {
      std::fill_n(acc, len, 0.0);
    }
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t i = 0; i < len; ++i) acc[i] += partial[b * channels + c + i];
    float* o = dweight.target(c, buf);
    for (int64_t i = 0; i < len; ++i) o[i] = float(acc[i]);
    dweight.commit(c, len, o);
  });
}

}  // namespace h2::cpu
