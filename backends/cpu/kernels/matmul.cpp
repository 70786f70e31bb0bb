// CPU matmul: out (S..., M, N) = alpha * op(a) @ op(b) + beta * out, on the device's GEMM library
// (kernel_context.h): oneDNN's matmul (one batched primitive per shape) or OpenBLAS SGEMM.
// Shapes: S... batch dims (product: batch), M rows of out, N columns, K the contracted extent;
// a is (S..., M, K) or (S..., K, M) with trans_a, b likewise (N, K) with trans_b, or rank 2 and
// shared over the batch (a linear layer's weight). Tensors are contiguous (kContiguous op).
// f32 runs on the tensors in place. bf16 runs in place too where oneDNN has native bf16 kernels
// (f32 accumulation, one rounding of the result); elsewhere bf16/f16 are widened to f32 scratch,
// multiplied in f32 and rounded back once, so the result differs from f32 by that rounding only.
// An f32 out under 16-bit inputs takes the f32 sums without that rounding (weight gradients).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backends/cpu/kernel_context.h"
#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/element.h"
#include "backends/cpu/kernels/gemm_blas.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

// Below this many FLOPs per matrix one sgemm keeps a thread team poorly busy (OpenBLAS itself
// uses one thread below 64^3 multiply-adds), so whole matrices go to separate threads.
constexpr double kSmallGemmFlops = 2.0 * 256 * 256 * 256;

struct MatmulDims {
  int64_t batch = 1;  // product of S...
  int64_t M = 0, N = 0, K = 0;
  bool b_shared = false;  // b is (K, N) / (N, K) for every batch entry
};

std::string describe(const MatmulArgs& args) {
  return fmt::format("out {} = a{} {} @ b{} {}", args.out.shape().str(), args.trans_a ? "^T" : "",
                     args.a.shape().str(), args.trans_b ? "^T" : "", args.b.shape().str());
}

MatmulDims check_shapes(const MatmulArgs& args) {
  const Tensor& out = args.out;
  const Tensor& a = args.a;
  const Tensor& b = args.b;
  const int rank = out.rank();
  H2_CHECK(rank >= 2 && a.rank() == rank && (b.rank() == rank || b.rank() == 2),
           "cpu matmul: a and out need one rank >= 2 and b that rank or 2: {}", describe(args));
  H2_CHECK(args.dtypes_agree(),
           "cpu matmul: dtypes: a {}, b {}, out {}; a and b share one, out has it too or is f32 "
           "under bf16/f16 inputs",
           dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(out.dtype()));
  MatmulDims d;
  d.b_shared = b.rank() == 2 && rank > 2;
  for (int i = 0; i < rank - 2; ++i) {
    H2_CHECK(a.size(i) == out.size(i) && (d.b_shared || b.size(i) == out.size(i)),
             "cpu matmul: batch dims differ: {}", describe(args));
    d.batch *= out.size(i);
  }
  d.M = out.size(-2);
  d.N = out.size(-1);
  d.K = args.trans_a ? a.size(-2) : a.size(-1);
  const int64_t a_m = args.trans_a ? a.size(-1) : a.size(-2);
  const int64_t b_k = args.trans_b ? b.size(-1) : b.size(-2);
  const int64_t b_n = args.trans_b ? b.size(-2) : b.size(-1);
  H2_CHECK(a_m == d.M && b_k == d.K && b_n == d.N,
           "cpu matmul: inner or outer extents do not match (M={}, N={}, K={}): {}", d.M, d.N, d.K,
           describe(args));
  H2_CHECK(!out.may_alias(a) && !out.may_alias(b), "cpu matmul: out overlaps an input: {}",
           describe(args));
  return d;
}

// Widens or narrows n contiguous elements on every thread (memory bound).
template <class From, class To>
void convert(const From* src, To* dst, int64_t n) {
  parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<To, float>) {
      to_floats(src + begin, end - begin, dst + begin);
    } else {
      from_floats(src + begin, end - begin, dst + begin);
    }
  });
}

// Whether to hand whole matrices to separate threads (each sgemm single-threaded) instead of
// running one multi-threaded sgemm after another. Small matrices always: one sgemm uses the team
// poorly and each call would pay a fork/join. Large ones too when the batch splits evenly, as a
// single-threaded sgemm on its own matrix never waits for a sibling; otherwise the imbalance of
// the last round costs more than threading inside each sgemm.
bool parallel_over_batch(const MatmulDims& d, int threads) {
  if (threads <= 1 || d.batch <= 1) return false;
  if (2.0 * double(d.M) * double(d.N) * double(d.K) < kSmallGemmFlops) return true;
  const int64_t rounds = (d.batch + threads - 1) / threads;
  return double(d.batch) >= 0.9 * double(rounds * threads);
}

// An empty sum (K == 0): out = beta * out, and beta == 0 must not read out.
void scale_out(const MatmulDims& d, float beta, float* c) {
  parallel_for(d.batch * d.M * d.N, 1, [&](int64_t begin, int64_t end) {
    if (beta == 0) {
      std::fill(c + begin, c + end, 0.0f);
    } else {
      for (int64_t i = begin; i < end; ++i) c[i] *= beta;
    }
  });
}

GemmCall onednn_call(const MatmulDims& d, const MatmulArgs& args, DType in, DType out) {
  return {.dims = {.batch = d.batch,
                   .m = d.M,
                   .n = d.N,
                   .k = d.K,
                   .trans_a = args.trans_a,
                   .trans_b = args.trans_b,
                   .b_shared = d.b_shared},
          .alpha = args.alpha,
          .beta = args.beta,
          .in = in,
          .out = out};
}

// The f32 core on OpenBLAS (K > 0; c is read only when beta != 0).
void matmul_openblas(const MatmulDims& d, const MatmulArgs& args, const float* a, const float* b,
                     float* c) {
  H2_CHECK(d.M < INT_MAX && d.N < INT_MAX && d.K < INT_MAX,
           "cpu matmul: an extent exceeds OpenBLAS's 32-bit index (H2_CPU_GEMM=onednn has none): "
           "{}",
           describe(args));
  const int64_t lda = args.trans_a ? d.M : d.K;
  const int64_t ldb = args.trans_b ? d.K : d.N;
  // A shared b with row-major a makes the batch one tall matrix: (batch * M, K) @ op(b).
  if (d.batch == 1 || (d.b_shared && !args.trans_a && d.batch * d.M < INT_MAX)) {
    sgemm(args.trans_a, args.trans_b, d.batch * d.M, d.N, d.K, args.alpha, a, lda, b, ldb,
          args.beta, c, d.N);
    return;
  }
  const int64_t a_step = d.M * d.K;
  const int64_t b_step = d.b_shared ? 0 : d.K * d.N;
  const int64_t c_step = d.M * d.N;
  auto one = [&](int64_t i) {
    sgemm(args.trans_a, args.trans_b, d.M, d.N, d.K, args.alpha, a + i * a_step, lda,
          b + i * b_step, ldb, args.beta, c + i * c_step, d.N);
  };
  if (parallel_over_batch(d, kernel_threads())) {
#pragma omp parallel for schedule(static) num_threads(kernel_threads())
    for (int64_t i = 0; i < d.batch; ++i) one(i);  // OpenBLAS stays single-threaded in here
  } else {
    for (int64_t i = 0; i < d.batch; ++i) one(i);
  }
}

// The f32 core on contiguous buffers shaped as MatmulDims says, on the device's GEMM library.
void matmul_f32(const MatmulDims& d, const MatmulArgs& args, const float* a, const float* b,
                float* c, KernelContext& context) {
  if (d.K == 0) return scale_out(d, args.beta, c);
  if (context.gemm_provider() == GemmProvider::openblas) return matmul_openblas(d, args, a, b, c);
  context.onednn().run(onednn_call(d, args, DType::f32, DType::f32), a, b, c, kernel_threads());
}

// Runs the phases one after another on every thread t of a team of at most `team` OpenMP
// threads, count of them (the runtime may give fewer), as phase(t, count), so that thread numbers
// index per-thread buffers, with a barrier between phases. An error (oneDNN refusing a shape)
// skips the later phases and is thrown after the region.
template <class... Phases>
void run_team(int64_t team, Phases&&... phases) {
  std::exception_ptr failure;
  std::atomic<bool> failed = false;
#pragma omp parallel num_threads(int(team))
  {
    const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    int64_t index = 0;
    auto run = [&](auto& phase) {
      if (index++ > 0) {
#pragma omp barrier
      }
      if (failed) return;
      try {
        phase(t, count);
      } catch (...) {
#pragma omp critical(h2_matmul_team_failure)
        if (!failure) failure = std::current_exception();
        failed = true;
      }
    };
    (run(phases), ...);
  }
  if (failure) std::rethrow_exception(failure);
}

// Blocks of an extent shared out among a team by whole blocks (thread t takes blocks
// [chunks t / team, chunks (t + 1) / team)): of the multiples of 16 up to `most` (at least 16), the
// one whose busiest thread has the fewest rows, the largest of those. 1,024 rows in blocks of at
// most 80 on 2 threads: 64 (8 blocks each), where 80 would give one thread 7 blocks and the other
// 6, leaving it idle for a twelfth of the multiply.
int64_t balanced_block(int64_t extent, int64_t most, int64_t team) {
  int64_t best = 16, busiest = INT64_MAX;
  for (int64_t block = std::max<int64_t>(16, most / 16 * 16); block >= 16; block -= 16) {
    const int64_t rows = ceil_div(ceil_div(extent, block), team) * block;
    if (rows < busiest) best = block, busiest = rows;
  }
  return best;
}

// The bytes of oneDNN workspace the largest of `calls` needs, as a whole number of 16-float
// (64-byte) units, so that per-thread slots laid end to end stay 64-byte aligned; 0 on OpenBLAS.
int64_t workspace_floats(KernelContext& context, std::initializer_list<GemmCall> calls) {
  if (context.gemm_provider() != GemmProvider::onednn) return 0;
  size_t bytes = 0;
  for (const GemmCall& call : calls)
    bytes = std::max(bytes, context.onednn().scratchpad_bytes(call));
  return int64_t((bytes + 63) / 64 * 16);
}

// One block's dense f32 GEMM (batch 1), `call`, on the calling thread alone inside a team: oneDNN
// with this thread's `workspace` (`floats` of it, from workspace_floats), or OpenBLAS, which a
// parallel region keeps single-threaded.
void run_block(KernelContext& context, const GemmCall& call, const float* a, const float* b,
               float* c, float* workspace, int64_t floats) {
  if (context.gemm_provider() == GemmProvider::onednn)
    return context.onednn().run_alone(call, a, b, c, workspace, size_t(floats) * sizeof(float));
  const GemmDims& d = call.dims;
  sgemm(d.trans_a, d.trans_b, d.m, d.n, d.k, call.alpha, a, d.trans_a ? d.m : d.k, b,
        d.trans_b ? d.k : d.n, call.beta, c, d.n);
}

// Splitting a GEMM among a team of threads by blocks of the rows of a row-major a (and out), or
// by blocks of the K rows of a^T and b, instead of leaving the split to the GEMM library. Both
// keep a thread on the token rows it owns: the element-wise kernels split a tensor of tokens into
// the same contiguous ranges, so the rows a thread's GEMM reads or writes are already in its
// core's cache. The library splits otherwise (a weight gradient's library GEMM reads every token
// on every thread): on two cores that share no last-level cache, splitting here made tiny's f32
// step 4% shorter on the AVX-512 path and 10% on the AVX2 path (docs/performance.md).
//
// 16-bit operands are widened a block at a time into the thread's own buffer and multiplied at
// once, while the block is in its cache. Whole-operand widening wrote and re-read every f32 copy
// through memory: on the AVX2 path tiny's bf16 step spent 17% of its time converting. f32 ones
// are read in place, one block per thread.
//
// Only where the operand every block reads again (b by rows, out by K) is small, a layer's
// weight: larger ones the GEMM library blocks better itself. Widened blocks of 512 KB, within a
// core's L2 on the CPUs measured (1 MB on Zen 4 and 5, 1-2 MB on Xeons): against 256 KB, fewer
// GEMM calls, and tiny's bf16 step 3% shorter on Zen 5 while its memory was slow.
constexpr int64_t kRowBlockFloats = 128 * 1024;       // a widened block of a and of a 16-bit out
constexpr int64_t kSharedOperandFloats = 256 * 1024;  // b or out, read by every block: 1 MB

// The most rows of a block: a thread's share rounded up to 16 (every thread gets a block), and
// for widened blocks also about as many as the budget holds for `row_floats` per row, but at
// least 32 (over budget where a row exceeds 4,096 floats).
template <class T>
int64_t most_block_rows(int64_t rows, int64_t row_floats, int64_t threads) {
  const int64_t share = ceil_div(ceil_div(rows, threads), 16) * 16;
  if constexpr (std::is_same_v<T, float>) return share;
  return std::min(std::max<int64_t>(32, kRowBlockFloats / row_floats), share);
}

// n elements of an operand as f32: in place, or widened into `buffer`.
template <class T>
const float* as_floats(const T* src, int64_t n, float* buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return src;
  } else {
    to_floats(src, n, buffer);
    return buffer;
  }
}

bool split_by_rows(const MatmulDims& d, const MatmulArgs& args) {
  return d.K > 0 && !args.trans_a && (d.batch == 1 || d.b_shared) &&
         d.K * d.N <= kSharedOperandFloats && !omp_in_parallel();
}

// One block: out rows (n, N) = alpha * a32 (n, K) @ op(b32) + beta * c32, on the calling thread.
GemmCall rows_call(const MatmulDims& d, const MatmulArgs& args, int64_t n) {
  return onednn_call({.batch = 1, .M = n, .N = d.N, .K = d.K}, args, DType::f32, DType::f32);
}

template <class T>
void matmul_by_rows(const MatmulDims& d, const MatmulArgs& args, Stream& stream,
                    KernelContext& context) {
  constexpr bool widen = !std::is_same_v<T, float>;
  const int64_t rows = d.batch * d.M, K = d.K, N = d.N;
  const bool narrow_out = args.out.dtype() != DType::f32;
  // Blocks of a multiple of 16 rows (the GEMM's row panels stay full), shared out evenly.
  const int64_t threads = kernel_threads();
  const int64_t block = balanced_block(rows, most_block_rows<T>(rows, K + N, threads), threads);
  const int64_t chunks = ceil_div(rows, block), last = rows - (chunks - 1) * block;
  const int64_t team = std::min(threads, chunks);
  // Each thread's slot: its widened block of a, of a 16-bit out, and oneDNN's workspace (for the
  // full block and the last one); all multiples of 16 floats, so each starts 64-byte aligned, as
  // the device's allocator aligns the whole.
  const int64_t pad = workspace_floats(
      context, {rows_call(d, args, std::min(block, rows)), rows_call(d, args, last)});
  const int64_t a_floats = widen ? block * K : 0, c_floats = narrow_out ? block * N : 0;
  const int64_t slot = a_floats + c_floats + pad;
  ScratchBuffer<float> b32(stream, widen ? size_t(K * N) : 0);
  ScratchBuffer<float> slots(stream, size_t(slot * team));
  const T* a = args.a.data_as<T>();
  const T* b = args.b.data_as<T>();
  const float* b_floats = nullptr;  // b as f32: widened in the team's first phase, or in place
  if constexpr (widen) {
    b_floats = b32.data();
  } else {
    b_floats = b;
  }
  auto multiply_block = [&](float* own, int64_t chunk) {
    const int64_t r0 = chunk * block, n = std::min(block, rows - r0);
    const float* a32 = as_floats(a + r0 * K, n * K, own);
    float* c32 = narrow_out ? own + a_floats : args.out.data_as<float>() + r0 * N;
    if (narrow_out && args.beta != 0) to_floats(args.out.data_as<T>() + r0 * N, n * N, c32);
    run_block(context, rows_call(d, args, n), a32, b_floats, c32, own + a_floats + c_floats, pad);
    if (narrow_out) from_floats(c32, n * N, args.out.data_as<T>() + r0 * N);
  };
  auto multiply_blocks = [&](int64_t t, int64_t count) {
    for (int64_t c = chunks * t / count; c < chunks * (t + 1) / count; ++c)
      multiply_block(slots.data() + slot * t, c);
  };
  if constexpr (!widen) return run_team(team, multiply_blocks);
  // In one region: every thread widens its share of b, then (after a barrier) its blocks.
  run_team(
      team,
      [&](int64_t t, int64_t count) {
        const int64_t begin = K * N * t / count, end = K * N * (t + 1) / count;
        to_floats(b + begin, end - begin, b32.data() + begin);
      },
      multiply_blocks);
}

// Weight gradients, out (M, N) f32 = alpha * a^T @ b + beta * out with a (K, M) and b (K, N), K
// the tokens: each thread takes a run of K blocks and adds their products into out (thread 0) or
// its own partial sum, which are added to out at the end. Only where the partial sums cost less
// than the blocks (out small against K).
bool split_by_k(const MatmulDims& d, const MatmulArgs& args, int64_t threads) {
  return d.K > 0 && d.batch == 1 && args.trans_a && !args.trans_b &&
         args.out.dtype() == DType::f32 && d.M * d.N <= kSharedOperandFloats &&
         d.M * d.N * (threads - 1) <= d.K * (d.M + d.N) && !omp_in_parallel();
}

// One block of n rows of a and b: c (M, N) = alpha * a32^T @ b32 + beta * c.
GemmCall k_block_call(const MatmulDims& d, const MatmulArgs& args, int64_t n, float beta) {
  GemmCall call =
      onednn_call({.batch = 1, .M = d.M, .N = d.N, .K = n}, args, DType::f32, DType::f32);
  call.beta = beta;
  return call;
}

template <class T>
void matmul_by_k(const MatmulDims& d, const MatmulArgs& args, Stream& stream,
                 KernelContext& context) {
  constexpr bool widen = !std::is_same_v<T, float>;
  const int64_t M = d.M, N = d.N, K = d.K, threads = kernel_threads();
  const int64_t block = balanced_block(K, most_block_rows<T>(K, M + N, threads), threads);
  const int64_t chunks = ceil_div(K, block), last = K - (chunks - 1) * block;
  const int64_t team = std::min(threads, chunks);
  // A thread's slot: its widened blocks of a and b and oneDNN's workspace for every block it may
  // run (full or last; into out with beta, or with 0 into a partial sum, or adding with 1).
  int64_t pad = 0;
  for (float beta : {args.beta, 0.0f, 1.0f})
    pad = std::max(pad, workspace_floats(context, {k_block_call(d, args, block, beta),
                                                   k_block_call(d, args, last, beta)}));
  const int64_t ab_floats = widen ? block * (M + N) : 0;
  const int64_t slot = ab_floats + pad;
  ScratchBuffer<float> slots(stream, size_t(slot * team));
  ScratchBuffer<float> partials(stream, size_t(M * N * (team - 1)));
  const T* a = args.a.data_as<T>();
  const T* b = args.b.data_as<T>();
  float* out = args.out.data_as<float>();
  // In one region: every thread adds its blocks' products, then (after a barrier) its share of
  // out's elements takes the other threads' partial sums.
  run_team(
      team,
      [&](int64_t t, int64_t count) {
        float* own = slots.data() + slot * t;
        float* c = t == 0 ? out : partials.data() + (t - 1) * M * N;
        float beta = t == 0 ? args.beta : 0.0f;
        for (int64_t chunk = chunks * t / count; chunk < chunks * (t + 1) / count; ++chunk) {
          const int64_t k0 = chunk * block, n = std::min(block, K - k0);
          const float* a32 = as_floats(a + k0 * M, n * M, own);
          const float* b32 = as_floats(b + k0 * N, n * N, own + block * M);
          run_block(context, k_block_call(d, args, n, beta), a32, b32, c, own + ab_floats, pad);
          beta = 1.0f;
        }
      },
      [&](int64_t t, int64_t count) {
        const int64_t begin = M * N * t / count, end = M * N * (t + 1) / count;
        for (int64_t other = 1; other < count; ++other) {
          const float* partial = partials.data() + (other - 1) * M * N;
          for (int64_t i = begin; i < end; ++i) out[i] += partial[i];
        }
      });
}

// bf16/f16 inputs: f32 copies of a and b, one f32 product; a 16-bit out is widened when beta
// reads it and rounded once at the end, an f32 out is written in place.
template <class T>
void matmul_widened(const MatmulDims& d, const MatmulArgs& args, Stream& stream,
                    KernelContext& context) {
  if (split_by_rows(d, args)) return matmul_by_rows<T>(d, args, stream, context);
  if (split_by_k(d, args, kernel_threads())) return matmul_by_k<T>(d, args, stream, context);
  const int64_t a_elems = args.a.numel();
  const int64_t b_elems = args.b.numel();
  ScratchBuffer<float> a32(stream, size_t(a_elems));
  ScratchBuffer<float> b32(stream, size_t(b_elems));
  convert(args.a.data_as<T>(), a32.data(), a_elems);
  convert(args.b.data_as<T>(), b32.data(), b_elems);
  if (args.out.dtype() == DType::f32)
    return matmul_f32(d, args, a32.data(), b32.data(), args.out.data_as<float>(), context);
  const int64_t c_elems = args.out.numel();
  ScratchBuffer<float> c32(stream, size_t(c_elems));
  if (args.beta != 0) convert(args.out.data_as<T>(), c32.data(), c_elems);
  matmul_f32(d, args, a32.data(), b32.data(), c32.data(), context);
  convert(c32.data(), args.out.data_as<T>(), c_elems);
}

}  // namespace

// out: (S..., M, N) = alpha * op(a) @ op(b) + beta * out; a, b: f32, bf16 or f16; out: theirs,
// or f32 under 16-bit inputs.
void matmul(const MatmulArgs& args, Stream& stream) {
  const MatmulDims d = check_shapes(args);
  if (d.batch == 0 || d.M == 0 || d.N == 0) return;
  KernelContext& context = kernel_context(stream);
  visit_float_dtype(args.a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      // One thread: the library's own call, no team.
      if (kernel_threads() > 1 && split_by_rows(d, args))
        return matmul_by_rows<float>(d, args, stream, context);
      if (kernel_threads() > 1 && split_by_k(d, args, kernel_threads()))
        return matmul_by_k<float>(d, args, stream, context);
      matmul_f32(d, args, args.a.data_as<float>(), args.b.data_as<float>(),
                 args.out.data_as<float>(), context);
    } else if constexpr (std::is_same_v<T, bf16_t>) {
      // Native bf16 GEMMs where the CPU has them: no widened copies of the operands.
      if (d.K > 0 && context.gemm_provider() == GemmProvider::onednn &&
          context.onednn().native_bf16()) {
        context.onednn().run(onednn_call(d, args, DType::bf16, args.out.dtype()), args.a.data(),
                             args.b.data(), args.out.data(), kernel_threads());
      } else {
        matmul_widened<T>(d, args, stream, context);
      }
    } else {
      matmul_widened<T>(d, args, stream, context);
    }
  });
}

}  // namespace h2::cpu
