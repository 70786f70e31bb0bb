// Full reductions to one f32 value: sum and sum of squares (gradient norms). Accumulated in double
// over fixed blocks whose partial sums are added in block order, so the result depends only on the
// input, never on the thread count. An empty input gives 0.
#include <algorithm>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_math.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

constexpr int64_t kBlock = 16 * kChunk;  // elements per partial sum

// in: (S...) -> out: one f32 element = sum(in) or sum(in^2).
template <bool kSquares>
void reduce(const SumArgs& args, Stream& stream, const char* op) {
  H2_CHECK(args.in.defined() && args.out.defined(), "{}: in and out must be defined", op);
  H2_CHECK(args.out.numel() == 1, "{}: out {} must have one element (in {})", op,
           args.out.shape().str(), args.in.shape().str());
  check_f32(args.out, op, "out");
  const FloatIn in(args.in, op, "in");
  const int64_t n = args.in.numel(), blocks = ceil_div(n, kBlock);
  ScratchBuffer<double> partial(stream, size_t(blocks));
  double* partial_sums = partial.data();
  parallel_for(blocks, kBlock, [&](int64_t b0, int64_t b1) {
    float buf[kChunk];
    for (int64_t b = b0; b < b1; ++b) {
      double s = 0;
      for (int64_t c = b * kBlock; c < std::min(n, (b + 1) * kBlock); c += kChunk) {
        int64_t len = std::min(kChunk, n - c);
        const float* x = in.read(c, len, buf);
        s += kSquares ? dot_f64(x, x, len) : sum_f64(x, len);
      }
      partial_sums[b] = s;
    }
  });
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += partial_sums[b];
  *static_cast<float*>(args.out.data()) = float(total);
}

}  // namespace

void sum(const SumArgs& args, Stream& stream) {
  reduce<false>(args, stream, "sum");
}

void sum_squares(const SumArgs& args, Stream& stream) {
  reduce<true>(args, stream, "sum_squares");
}

}  // namespace h2::cpu
