// CPU qmatmul: out (M, N) = alpha * deq(a) @ deq(b)^T + beta * out, for quantized a and b
// (core/lowp/quant_spec.h), products accumulated in FP32. Four routes, the first that applies:
// one exact bf16 GEMM where both operands' scales fold into bf16 values (qmatmul_bf16: per-tensor,
// E8M0, NVFP4); FP32 block scales that change along K (qmatmul_kblocks_bf16: fp8_blockwise),
// each block's products promoted in registers or AMX tiles by H2's kernel (kblock_gemm.h) where
// the device's context chooses it, else by oneDNN GEMMs, a group of blocks per call; both routes
// need oneDNN's native bf16. Without it, H2's FP32 K-block kernels where the context chooses
// them (qmatmul_kblocks_fp32: AVX-512 or AVX2 tiles, kblock_fp32.h) take FP32 block scales
// (per-tensor ones too) and operands whose scales fold into exact values.
// Otherwise FP32 tiles, below.
//
// Shapes: M rows of a and out; N rows of b (columns of out); K the reduction extent (columns of
// both operands' codes). Each operand has its own spec: blocks br x bc, scale grid GR x GC.
// kc: the K chunk (kKChunk, or all of K when smaller); Mp, Np: rows of a and b per panel
// (kPanelRows at most).
//
// Algorithm. Full FP32 copies of the operands are never made. For each (Mp x Np) panel of out,
// for each K chunk:
//   1. decode rows [m0, m0 + Mp) of a, columns [k0, k0 + kc), into an FP32 tile (Mp x kc), and
//      the same rows of b into another (Np x kc): element = table[code] * its block's FP32 scale
//      (E2M1: a 256-entry table of nibble pairs), row by row in parallel; a row's segment of
//      constant scale is one inner loop;
//   2. SGEMM acc (Mp x Np) += alpha * tile_a @ tile_b^T (the first chunk applies beta; OpenBLAS
//      uses every thread).
// acc is out itself when out is f32 (ld N), else an FP32 panel scratch rounded to bf16/f16 once at
// the end. Scratch: (Mp + Np) * kc floats for tiles plus Mp * Np for a 16-bit out, whatever the
// problem size. Decoding re-reads b once per M panel and a once per N panel: with 2048-row
// panels that is a few percent of the SGEMM time.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>

#include "backends/cpu/kernel_context.h"
#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/element.h"
#include "backends/cpu/kernels/gemm_blas.h"
#include "backends/cpu/kernels/gemm_onednn.h"
#include "backends/cpu/kernels/kblock_gemm.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/quant_operand.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/error.h"
#include "core/lowp/format_codec.h"
#include "core/lowp/quant_check.h"

namespace h2::cpu {
namespace {

using lowp::Format;
using lowp::ScaleRule;

constexpr int64_t kKChunk = 512;      // a multiple of every usual block_cols (16, 32, 128, 256)
constexpr int64_t kPanelRows = 2048;  // rows of a (and of b) decoded per panel
constexpr int64_t kMaxBf16Operand = int64_t(64) << 20;  // b's elements decoded whole (128 MiB)
constexpr int64_t kTileFloats = int64_t(1) << 20;       // the K-block path's FP32 tile: 4 MiB
constexpr int64_t kKBlockAlign = 16;   // K block widths not a multiple of it: the FP32 path
constexpr int64_t kBlocksPerPass = 4;  // K blocks' products the K-block route rescales per pass

void check_args(const QMatmulArgs& args) {
  lowp::check_qtensor(args.a, "qmatmul", "a");
  lowp::check_qtensor(args.b, "qmatmul", "b");
  const Tensor& out = args.out;
  H2_CHECK(out.defined() && out.rank() == 2, "cpu qmatmul: out must be an (M, N) matrix, got {}",
           out.str());
  check_float(out, "qmatmul", "out");
  H2_CHECK(args.a.cols() == args.b.cols() && out.size(0) == args.a.rows() &&
               out.size(1) == args.b.rows(),
           "cpu qmatmul: out {} = a {} @ b {}^T does not fit", out.shape().str(),
           args.a.codes.shape().str(), args.b.codes.shape().str());
  H2_CHECK(args.a.rows() < INT_MAX && args.b.rows() < INT_MAX && args.a.cols() < INT_MAX,
           "cpu qmatmul: an extent exceeds OpenBLAS's 32-bit index: a {}, b {}",
           args.a.codes.shape().str(), args.b.codes.shape().str());
}

// out = beta * out (K == 0: the sum is empty; beta == 0 must not read out).
void scale_out(const QMatmulArgs& args) {
  FloatOut out(args.out, "qmatmul", "out");
  FloatIn in(args.out, "qmatmul", "out");
  parallel_chunks(args.out.numel(), kChunk, 2, [&](int64_t begin, int64_t n) {
    float buf[kChunk];
    float* target = out.target(begin, buf);
    if (args.beta == 0) {
      std::fill(target, target + n, 0.0f);
    } else {
      const float* x = in.read(begin, n, buf);
      for (int64_t i = 0; i < n; ++i) target[i] = args.beta * x[i];
    }
    out.commit(begin, n, target);
  });
}

// What both bf16 routes need: oneDNN with native bf16 GEMMs, an f32 or bf16 out, and b's codes
// decoded whole within kMaxBf16Operand.
bool bf16_gemms_apply(const QMatmulArgs& args, KernelContext& context) {
  return context.gemm_provider() == GemmProvider::onednn && context.onednn().native_bf16() &&
         args.out.dtype() != DType::f16 && args.b.rows() * args.b.cols() <= kMaxBf16Operand;
}

// The exact bf16 path: where both operands fold to bf16 (QuantOperand::folds_to_bf16) and oneDNN
// multiplies bf16 natively, out = (alpha * fa * fb) * A' @ B'^T + beta * out in one GEMM per M
// panel, A' and B' the operands' bf16 local values. The products are exact in FP32 and summed in
// FP32, as in the FP32 path; only the order of the sums differs. Returns false (nothing done)
// where it does not apply.
bool qmatmul_bf16(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                  Stream& stream) {
  const int64_t M = args.a.rows(), N = args.b.rows(), K = args.a.cols();
  KernelContext& context = kernel_context(stream);
  const DType out_dtype = args.out.dtype();
  if (!bf16_gemms_apply(args, context) || !a.folds_to_bf16(M) || !b.folds_to_bf16(N)) return false;
  const float alpha = args.alpha * a.bf16_factor() * b.bf16_factor();
  const int64_t mp_max = std::min(M, kPanelRows);
  ScratchBuffer<uint16_t> b16(stream, size_t(N * K));
  ScratchBuffer<uint16_t> a16(stream, size_t(mp_max * K));
  parallel_for(
      N, K, [&](int64_t r0, int64_t r1) { b.decode_rows_bf16(r0, r1 - r0, b16.data() + r0 * K); });
  const size_t out_bytes = dtype_storage_bytes(out_dtype, 1);
  for (int64_t m0 = 0; m0 < M; m0 += mp_max) {
    const int64_t mp = std::min(mp_max, M - m0);
    parallel_for(mp, K, [&](int64_t r0, int64_t r1) {
      a.decode_rows_bf16(m0 + r0, r1 - r0, a16.data() + r0 * K);
    });
    const GemmCall call{.dims = {.m = mp, .n = N, .k = K, .trans_b = true},
                        .alpha = alpha,
                        .beta = args.beta,
                        .in = DType::bf16,
                        .out = out_dtype};
    auto* out = static_cast<std::byte*>(args.out.data()) + size_t(m0 * N) * out_bytes;
    context.onednn().run(call, a16.data(), b16.data(), out, kernel_threads());
  }
  return true;
}

// The K-block bf16 path, for FP32 block scales that change along K (fp8_blockwise: 1 x kb and
// kb x kb blocks). Within one K block every row of a and of b has one scale, so
//   out = beta * out + sum_j alpha * diag(sa_j) (A_j @ B_j^T) diag(sb_j),
// A_j and B_j the code values of K block j (exact in bf16) and sa_j, sb_j the rows' scales: one
// bf16 GEMM per K block into an FP32 tile T_j (products exact, summed in FP32), and a pass that
// adds (alpha * s_a * s_b) * T_j into the FP32 accumulator, block after block, as an FP8 tensor
// core promotes its partial sums to FP32 once per K block. One pass takes kBlocksPerPass blocks'
// tiles, each row of the accumulator read and written once for them (the same sums in the same
// order: 3% faster fwd and dgrad than a pass per block). The operands are decoded whole (b) or
// per panel (a) into block-major copies, each K block dense, and a group's blocks go as one
// batched GEMM: oneDNN 2.6 runs blocks read in place (row stride K) on its gemm:jit kernels and
// dense ones on brgemm, AMX's included (on an AMX Xeon the fp8_blockwise step went from 2.2x to
// 1.8x the bf16 step; on an AVX512_BF16 EPYC, where this route now runs only under
// H2_CPU_KBLOCK_GEMM=onednn, in place had been 15% faster). The
// accumulator is out itself (f32) or an FP32 panel rounded once. Panels of mp rows bound each T (mp
// x N floats) to 4 MiB (the group's tiles to 16 MiB): a whole training GEMM up to N = 1024 at 1,024
// tokens, since fewer, larger GEMMs beat keeping T in L2 (fp8_blockwise numerics-256 step 159
// against 176 ms with 512 KiB panels). Where the context chooses H2's kernel (kblock_gemm.h:
// the same promotions without the tiles) that runs instead. Returns false where neither applies.
bool qmatmul_kblocks_bf16(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                          Stream& stream) {
  const int64_t M = args.a.rows(), N = args.b.rows(), K = args.a.cols();
  KernelContext& context = kernel_context(stream);
  const DType out_dtype = args.out.dtype();
  const int64_t kb = a.block_cols();
  if (!bf16_gemms_apply(args, context) || a.rule() != ScaleRule::f32_amax ||
      b.rule() != ScaleRule::f32_amax || b.block_cols() != kb || kb % kKBlockAlign != 0)
    return false;
  if (context.kblock_kernel() == KBlockKernel::h2_avx512_bf16 &&
      kblock_gemm_suits(kb)) {  // promoted per block (kblock_gemm.h)
    kblock_gemm(args, a, b, stream);
    return true;
  }
  const int64_t blocks = ceil_div(K, kb);
  auto width = [&](int64_t j) { return std::min(kb, K - j * kb); };
  // Code values of rows [first, first + rows) of q, block-major: block j's (rows x width(j))
  // values are dense at dst + j * rows * kb (oneDNN runs dense operands on its brgemm kernels,
  // AMX's among them, and strided ones on its slower gemm), each row decoded whole, then
  // scattered.
  auto decode_rows = [&](const QuantOperand& q, int64_t first, int64_t rows, uint16_t* dst) {
    parallel_for(rows, K, [&](int64_t i0, int64_t i1) {
      const std::unique_ptr<uint16_t[]> row(new uint16_t[size_t(K)]);  // every element written
      for (int64_t i = i0; i < i1; ++i) {
        q.decode_codes_bf16_rows(first + i, 1, row.get());
        for (int64_t j = 0; j < blocks; ++j)
          std::memcpy(dst + j * rows * kb + i * width(j), row.get() + j * kb,
                      size_t(width(j)) * sizeof(uint16_t));
      }
    });
  };
  ScratchBuffer<uint16_t> b16(stream, size_t(N * blocks * kb));
  decode_rows(b, 0, N, b16.data());
  const int64_t mp_max = std::min(M, std::max<int64_t>(16, kTileFloats / N / 16 * 16));
  const int64_t group = std::min(blocks, kBlocksPerPass);
  ScratchBuffer<uint16_t> a16(stream, size_t(mp_max * blocks * kb));
  ScratchBuffer<float> tiles(stream, size_t(group * mp_max * N));  // one T per block of a group
  const bool f32_out = out_dtype == DType::f32;
  ScratchBuffer<float> acc_panel(stream, f32_out ? 1 : size_t(mp_max * N));
  ScratchBuffer<float> b_scale(stream, size_t(group * N));  // each block's scale of each row of b
  const FloatIn out_in(args.out, "qmatmul", "out");
  bf16_t* out16 = f32_out ? nullptr : args.out.data_as<bf16_t>();
  const int64_t a_br = a.block_rows(), b_br = b.block_rows();

  for (int64_t m0 = 0; m0 < M; m0 += mp_max) {
    const int64_t mp = std::min(mp_max, M - m0);
    float* acc = f32_out ? args.out.data_as<float>() + m0 * N : acc_panel.data();
    decode_rows(a, m0, mp, a16.data());
    for (int64_t j0 = 0; j0 < blocks; j0 += group) {
      const int64_t g = std::min(group, blocks - j0);
      // T_j = a_j @ b_j^T: the group's full-width blocks as one batched GEMM, a narrower last
      // block on its own.
      for (int64_t t = 0; t < g;) {
        const int64_t j = j0 + t;
        int64_t batch = 1;
        while (t + batch < g && width(j + batch) == width(j)) ++batch;
        const GemmCall call{
            .dims = {.batch = batch, .m = mp, .n = N, .k = width(j), .trans_b = true},
            .in = DType::bf16,
            .out = DType::f32};
        context.onednn().run(call, a16.data() + j * mp * kb, b16.data() + j * N * kb,
                             tiles.data() + t * mp * N, kernel_threads());
        t += batch;
      }
      for (int64_t t = 0; t < g; ++t)
        for (int64_t n = 0; n < N; ++n) b_scale.data()[t * N + n] = b.scale(n / b_br, j0 + t);
      // acc (+)= (alpha * s_a(i) * s_b(n)) * T_j for the group's blocks in order, the first
      // block starting from beta * out: each row of acc read and written once per group.
      parallel_for(mp, g * N, [&](int64_t i0, int64_t i1) {
        float prev_buf[kChunk];
        for (int64_t i = i0; i < i1; ++i) {
          float* c = acc + i * N;
          for (int64_t t = 0; t < g; ++t) {
            const int64_t j = j0 + t;
            const float sa = args.alpha * a.scale((m0 + i) / a_br, j);
            const float* sb = b_scale.data() + t * N;
            const float* tile = tiles.data() + (t * mp + i) * N;
            if (j > 0) {
#pragma omp simd
              for (int64_t n = 0; n < N; ++n) c[n] += (sa * sb[n]) * tile[n];
            } else if (args.beta == 0) {
#pragma omp simd
              for (int64_t n = 0; n < N; ++n) c[n] = (sa * sb[n]) * tile[n];
            } else {  // beta * out: out's own row (f32 in place, or the 16-bit out widened)
              for (int64_t c0 = 0; c0 < N; c0 += kChunk) {
                const int64_t len = std::min(kChunk, N - c0);
                const float* prev = out_in.read((m0 + i) * N + c0, len, prev_buf);
                for (int64_t n = 0; n < len; ++n)
                  c[c0 + n] = args.beta * prev[n] + (sa * sb[c0 + n]) * tile[c0 + n];
              }
            }
          }
          // A 16-bit out takes its row once the last block is in, while the row is in L1.
          if (j0 + g == blocks && !f32_out) from_floats(c, N, out16 + (m0 + i) * N);
        }
      });
    }
  }
  return true;
}

// Without bf16 GEMMs, where the context chooses one of H2's FP32 kernels (kblock_gemm.h: AVX-512
// or AVX2), for an f32 or bf16 out: FP32 scales in blocks of one width along K on both operands
// (one block for per-tensor scales), promoted per block as above; else scales that fold into
// exact values on both sides, the exact bf16 path's products and sums in FP32, one block. Returns
// false where neither applies.
bool qmatmul_kblocks_fp32(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                          Stream& stream) {
  const KBlockKernel kernel = kernel_context(stream).kblock_kernel();
  if ((kernel != KBlockKernel::h2_avx512 && kernel != KBlockKernel::h2_avx2) ||
      args.out.dtype() == DType::f16)
    return false;
  const auto gemm = kernel == KBlockKernel::h2_avx512 ? kblock_gemm_avx512 : kblock_gemm_avx2;
  if (a.rule() == ScaleRule::f32_amax && b.rule() == ScaleRule::f32_amax &&
      b.block_cols() == a.block_cols()) {
    gemm(args, a, b, KBlockValues::codes, stream);
    return true;
  }
  if (!a.folds_to_bf16(args.a.rows()) || !b.folds_to_bf16(args.b.rows())) return false;
  gemm(args, a, b, KBlockValues::local, stream);
  return true;
}

}  // namespace

// out (M, N) f32/bf16/f16 = alpha * deq(a (M, K)) @ deq(b (N, K))^T + beta * out.
void qmatmul(const QMatmulArgs& args, Stream& stream) {
  check_args(args);
  const int64_t M = args.a.rows(), N = args.b.rows(), K = args.a.cols();
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_out(args);
  const QuantOperand a(args.a), b(args.b);
  if (qmatmul_bf16(args, a, b, stream)) return;
  if (qmatmul_kblocks_bf16(args, a, b, stream)) return;
  if (qmatmul_kblocks_fp32(args, a, b, stream)) return;
  // The tiles' GEMMs through the matmul op's library: oneDNN runs on the same OpenMP threads as
  // the decoding, where OpenBLAS's own threads contended with them (fp8_blockwise steps varied
  // from 198 to 253 ms between runs).
  KernelContext& context = kernel_context(stream);
  const bool onednn = context.gemm_provider() == GemmProvider::onednn;
  const int64_t kc_max = std::min(K, kKChunk);
  const int64_t mp_max = std::min(M, kPanelRows), np_max = std::min(N, kPanelRows);
  ScratchBuffer<float> tile_a(stream, size_t(mp_max * kc_max));
  ScratchBuffer<float> tile_b(stream, size_t(np_max * kc_max));
  const bool f32_out = args.out.dtype() == DType::f32;
  ScratchBuffer<float> acc_panel(stream, f32_out ? 1 : size_t(mp_max * np_max));
  float* out32 = f32_out ? args.out.data_as<float>() : nullptr;

  for (int64_t m0 = 0; m0 < M; m0 += mp_max) {
    const int64_t mp = std::min(mp_max, M - m0);
    for (int64_t n0 = 0; n0 < N; n0 += np_max) {
      const int64_t np = std::min(np_max, N - n0);
      float* acc = f32_out ? out32 + m0 * N + n0 : acc_panel.data();
      const int64_t ldc = f32_out ? N : np;
      float beta = args.beta;
      if (!f32_out && beta != 0) {  // the panel of a 16-bit out, widened
        visit_float_dtype(args.out.dtype(), "qmatmul", [&](auto tag) {
          using T = decltype(tag);
          const T* src = args.out.data_as<T>();
          parallel_for(mp, np, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i) to_floats(src + (m0 + i) * N + n0, np, acc + i * np);
          });
        });
      }
      for (int64_t k0 = 0; k0 < K; k0 += kc_max) {
        const int64_t kc = std::min(kc_max, K - k0);
        a.decode_tile(m0, mp, k0, kc, tile_a.data());
        b.decode_tile(n0, np, k0, kc, tile_b.data());
        if (onednn && ldc == np) {  // acc contiguous: oneDNN, on the kernels' OpenMP threads
          const GemmCall call{.dims = {.m = mp, .n = np, .k = kc, .trans_b = true},
                              .alpha = args.alpha,
                              .beta = beta};
          context.onednn().run(call, tile_a.data(), tile_b.data(), acc, kernel_threads());
        } else {
          sgemm(false, true, mp, np, kc, args.alpha, tile_a.data(), kc, tile_b.data(), kc, beta,
                acc, ldc);
        }
        beta = 1;
      }
      if (!f32_out) {
        visit_float_dtype(args.out.dtype(), "qmatmul", [&](auto tag) {
          using T = decltype(tag);
          T* dst = args.out.data_as<T>();
          parallel_for(mp, np, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; ++i)
              from_floats(acc + i * np, np, dst + (m0 + i) * N + n0);
          });
        });
      }
    }
  }
}

}  // namespace h2::cpu
