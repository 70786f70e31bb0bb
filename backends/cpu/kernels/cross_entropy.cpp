// Cross-entropy over a vocabulary, fused with the log-softmax: one pass per row with an online
// (running max, rescaled) logsumexp, exp in FP32 and the sum in double. lse is computed for every
// row, ignored ones included; their loss and gradient are 0. Targets are checked before any work.
// Chunks are read before they are written, so dlogits may alias logits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_math.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

// Checks logits (N, V), targets (N) i32/i64 in [0, V) or == ignore_index, and (N) f32 row
// statistics; returns N.
int64_t check_cross_entropy(const char* op, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, int64_t ignore_index) {
  H2_CHECK(logits.defined() && targets.defined() && lse.defined(),
           "{}: logits, targets and lse must be defined", op);
  H2_CHECK(logits.rank() == 2, "{}: logits {} must be (N, V)", op, logits.shape().str());
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  H2_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64,
           "{}: targets dtype {} is not i32 or i64", op, dtype_name(targets.dtype()));
  H2_CHECK(targets.numel() == rows, "{}: targets {} but logits {} has N={}", op,
           targets.shape().str(), logits.shape().str(), rows);
  H2_CHECK(lse.numel() == rows, "{}: lse {} but logits {} has N={}", op, lse.shape().str(),
           logits.shape().str(), rows);
  check_f32(lse, op, "lse");
  const void* data = rows > 0 ? targets.data() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = load_index(data, targets.dtype(), r);
    H2_CHECK(t == ignore_index || (t >= 0 && t < vocab),
             "{}: targets[{}] = {} is outside [0, V = {}) and is not ignore_index {}", op, r, t,
             vocab, ignore_index);
  }
  return rows;
}

}  // namespace

// logits: (N, V), targets: (N) -> losses: (N) f32 = lse - logits[target], lse: (N) f32.
void cross_entropy_fwd(const CrossEntropyFwdArgs& args, Stream&) {
  const char* op = "cross_entropy_fwd";
  const int64_t rows =
      check_cross_entropy(op, args.logits, args.targets, args.lse, args.ignore_index);
  H2_CHECK(args.losses.defined() && args.losses.numel() == rows, "{}: losses {} but logits {}", op,
           args.losses.shape().str(), args.logits.shape().str());
  check_f32(args.losses, op, "losses");
  if (rows == 0) return;
  const int64_t vocab = args.logits.size(1);
  const FloatIn logits(args.logits, op, "logits");
  const void* targets = args.targets.data();
  const DType target_dtype = args.targets.dtype();
  float* losses = static_cast<float*>(args.losses.data());
  float* lse_out = static_cast<float*>(args.lse.data());
  const int64_t ignore_index = args.ignore_index;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  parallel_for_fastest(rows, 4 * vocab, [=](int64_t r0, int64_t r1) {
    float x_buf[kChunk], e_buf[kChunk];
    for (int64_t r = r0; r < r1; ++r) {
      float row_max = kNegInf;
      double sum = 0;  // sum of exp(logit - row_max) so far
      for (int64_t c = 0; c < vocab; c += kChunk) {
        const int64_t len = std::min(kChunk, vocab - c);
        const float* x = logits.read(r * vocab + c, len, x_buf);
        const float chunk_max = max_f32(x, len);
        if (chunk_max > row_max) {
          if (row_max != kNegInf) sum *= std::exp(double(row_max) - double(chunk_max));
          row_max = chunk_max;
        }
        if (row_max == kNegInf) continue;  // every logit so far is -inf: nothing to add
        const float m = row_max;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) e_buf[i] = exp_f32(x[i] - m);
        sum += sum_f64(e_buf, len);
      }
      const double lse = double(row_max) + std::log(sum);
      lse_out[r] = float(lse);
      const int64_t t = load_index(targets, target_dtype, r);
      losses[r] = t == ignore_index ? 0.0f : float(lse - logits.at(r * vocab + t));
    }
  });
}

// logits: (N, V), lse: (N) f32, targets: (N) -> dlogits: (N, V) = (softmax - onehot) * dloss.
void cross_entropy_bwd(const CrossEntropyBwdArgs& args, Stream&) {
  const char* op = "cross_entropy_bwd";
  const int64_t rows =
      check_cross_entropy(op, args.logits, args.targets, args.lse, args.ignore_index);
  check_same_shape(op, args.dlogits, "dlogits", args.logits, "logits");
  const int64_t vocab = args.logits.size(1);
  if (rows == 0 || vocab == 0) return;
  const FloatIn logits(args.logits, op, "logits");
  const FloatOut dlogits(args.dlogits, op, "dlogits");
  const void* targets = args.targets.data();
  const DType target_dtype = args.targets.dtype();
  const float* lse = static_cast<const float*>(args.lse.data());
  const float dloss = args.dloss;
  const int64_t ignore_index = args.ignore_index;
  // Work items are (row, chunk) pairs, so a few long rows still spread over the threads.
  const int64_t chunks = ceil_div(vocab, kChunk);
  parallel_for_fastest(rows * chunks, 4 * std::min(kChunk, vocab), [=](int64_t i0, int64_t i1) {
    float x_buf[kChunk], o_buf[kChunk];
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t r = item / chunks, c = (item % chunks) * kChunk;
      const int64_t len = std::min(kChunk, vocab - c), at = r * vocab + c;
      const int64_t t = load_index(targets, target_dtype, r);
      float* o = dlogits.target(at, o_buf);
      if (t == ignore_index) {
        std::fill_n(o, len, 0.0f);
      } else {
        const float* x = logits.read(at, len, x_buf);
        const float m = lse[r];
        const bool has_target = t >= c && t < c + len;
        const float target_logit = has_target ? x[t - c] : 0.0f;  // before o (maybe x) is written
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) o[i] = exp_f32(x[i] - m) * dloss;
        if (has_target) o[t - c] = (exp_f32(target_logit - m) - 1.0f) * dloss;
      }
      dlogits.commit(at, len, o);
    }
  });
}

}  // namespace h2::cpu
