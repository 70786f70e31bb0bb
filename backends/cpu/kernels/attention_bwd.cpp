// CPU causal attention backward, flash style: probabilities are recomputed block by block from
// the saved lse, never stored, so memory is O(T * D) per thread (dK/dV accumulators) whatever T.
// A task owns one kv head of one batch entry: it loops over the group's query heads, each query
// block and the key chunks it sees, accumulating dK and dV for the whole sequence privately (no
// races, no atomics) and each dQ block fully before storing it. Per (query block, key chunk):
//   P = exp(scale*Q K^T - lse), dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
//   dQ += scale * dS K, dK += scale * dS^T Q; masked keys have P = 0, hence dS = 0.
// The five products are attention_tiles.h's register tiles, which skip what the mask empties;
// the task's K and V are transposed once, for the two products shaped like scores.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/attention_common.h"
#include "backends/cpu/kernels/attention_tiles.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "backends/cpu/kernels/transpose.h"
#include "backends/cpu/kernels/wide_rows.h"

namespace h2::cpu {
namespace {

using attention::Dims;
using attention::kKeyBlock;
using attention::kQueryBlock;
using attention::padded_row;

// One thread's scratch, carved from a shared ScratchBuffer.
struct BwdWorkspace {
  int64_t ld;    // d.chunk_ld(): the row stride of probs and dscores
  int64_t t_ld;  // padded_row(T): the row stride of k_t and v_t
  float* dk;     // (T, D): dK of the task's kv head
  float* dv;     // (T, D)
  float* k_t;    // (D, T), rows t_ld apart: the task's k and v rows transposed (B of P and dP)
  float* v_t;
  float* k_rows;   // (T, D): f32 copy of the task's k rows
  float* probs;    // (kQueryBlock, kKeyBlock), rows ld apart: P of one block and key chunk
  float* dscores;  // (kQueryBlock, kKeyBlock), rows ld apart: dP, then dS
  float* dq;       // (kQueryBlock, D): dQ of one query block
  float* q_rows;   // (kQueryBlock, D): f32 copies of the block's q and dout rows
  float* do_rows;
  float* delta;  // (kQueryBlock): rowsum(dO * O)

  static int64_t floats(const Dims& d) {
    return 3 * d.T * d.D + 2 * d.D * padded_row(d.T) +
           kQueryBlock * (2 * d.chunk_ld() + 3 * d.D + 1);
  }
  BwdWorkspace(float* base, const Dims& d)
      : ld(d.chunk_ld()),
        t_ld(padded_row(d.T)),
        dk(base),
        dv(dk + d.T * d.D),
        k_t(dv + d.T * d.D),
        v_t(k_t + d.D * t_ld),
        k_rows(v_t + d.D * t_ld),
        probs(k_rows + d.T * d.D),
        dscores(probs + kQueryBlock * ld),
        dq(dscores + kQueryBlock * ld),
        q_rows(dq + kQueryBlock * d.D),
        do_rows(q_rows + kQueryBlock * d.D),
        delta(do_rows + kQueryBlock * d.D) {}
};

template <class T>
struct BwdTensors {
  T* dq;             // (B, T, H, D)
  T* dk;             // (B, T, Hkv, D)
  T* dv;             // (B, T, Hkv, D)
  const T* dout;     // (B, T, H, D)
  const T* q;        // (B, T, H, D)
  const T* k;        // (B, T, Hkv, D)
  const T* v;        // (B, T, Hkv, D)
  const T* out;      // (B, T, H, D)
  const float* lse;  // (B, H, T)
};

// P = exp(s - lse) in place over a key chunk's (rows, cols) scores; 0 for future keys.
void probabilities(float* p, int64_t ld, const float* lse, int64_t rows, int64_t cols, int64_t q0,
                   int64_t k0) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = p + i * ld;
    const int64_t n = attention::visible_keys(q0, i, k0, cols);
    exp_shifted(row, n, lse[i]);
    std::fill(row + n, row + cols, 0.0f);
  }
}

// One query block of head h against every key chunk it sees (k: the kv head's rows, D apart).
template <class T>
void backward_query_block(const BwdTensors<T>& t, const Dims& d, float scale, int64_t b, int64_t h,
                          int64_t qb, const float* k, BwdWorkspace& ws) {
  const int64_t D = d.D;
  const int64_t q_stride = d.H * D;
  const int64_t q0 = qb * kQueryBlock;
  const int64_t rows = std::min(kQueryBlock, d.T - q0);
  const int64_t q_offset = ((b * d.T + q0) * d.H + h) * D;
  const float* q = attention::rows_to_f32(t.q + q_offset, q_stride, rows, D, ws.q_rows);
  const float* dout = attention::rows_to_f32(t.dout + q_offset, q_stride, rows, D, ws.do_rows);
  const float* lse = t.lse + (b * d.H + h) * d.T + q0;
  for (int64_t i = 0; i < rows; ++i) {
    const float* g = dout + i * D;
    const T* o = t.out + q_offset + i * q_stride;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < D; ++c) dot += g[c] * load(o + c);
    ws.delta[i] = dot;
  }

  using attention::Masked;
  for (int64_t k0 = 0; k0 < q0 + rows; k0 += kKeyBlock) {
    const int64_t cols = std::min(kKeyBlock, q0 + rows - k0);
    const int64_t diagonal = q0 - k0;
    float* dk = ws.dk + k0 * D;
    float* dv = ws.dv + k0 * D;
    // P (rows, cols) from the recomputed scores, up to each row's last key.
    attention::tile_product({.M = rows,
                             .N = cols,
                             .K = D,
                             .alpha = scale,
                             .masked = Masked::columns,
                             .diagonal = diagonal},
                            {q, D, 1}, {ws.k_t + k0, ws.t_ld}, ws.probs, ws.ld);
    probabilities(ws.probs, ws.ld, lse, rows, cols, q0, k0);
    // dV (cols, D) += P^T dO.
    attention::tile_product({.M = cols,
                             .N = D,
                             .K = rows,
                             .accumulate = true,
                             .masked = Masked::k_before_diagonal,
                             .diagonal = diagonal},
                            {ws.probs, 1, ws.ld}, {dout, D}, dv, D);
    // dP (rows, cols) = dO V^T, then dS = P * (dP - delta): the gradient of the scaled scores,
    // 0 past each row's last key (where dP was not computed).
    attention::tile_product(
        {.M = rows, .N = cols, .K = D, .masked = Masked::columns, .diagonal = diagonal},
        {dout, D, 1}, {ws.v_t + k0, ws.t_ld}, ws.dscores, ws.ld);
    for (int64_t i = 0; i < rows; ++i) {
      const float* p = ws.probs + i * ws.ld;
      float* ds = ws.dscores + i * ws.ld;
      const int64_t n = attention::visible_keys(q0, i, k0, cols);
      const float delta = ws.delta[i];
#pragma omp simd simdlen(16)
      for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - delta);
      std::fill(ds + n, ds + cols, 0.0f);
    }
    // dQ (rows, D) += scale * dS K and dK (cols, D) += scale * dS^T Q.
    attention::tile_product({.M = rows,
                             .N = D,
                             .K = cols,
                             .alpha = scale,
                             .accumulate = k0 != 0,
                             .masked = Masked::k_after_diagonal,
                             .diagonal = diagonal},
                            {ws.dscores, ws.ld, 1}, {k + k0 * D, D}, ws.dq, D);
    attention::tile_product({.M = cols,
                             .N = D,
                             .K = rows,
                             .alpha = scale,
                             .accumulate = true,
                             .masked = Masked::k_before_diagonal,
                             .diagonal = diagonal},
                            {ws.dscores, 1, ws.ld}, {q, D}, dk, D);
  }
  attention::store_rows(t.dq + q_offset, q_stride, ws.dq, rows, D);
}

// One task: kv head kvh of batch entry b, with every query head of its group.
template <class T>
void backward_kv_head(const BwdTensors<T>& t, const Dims& d, float scale, int64_t b, int64_t kvh,
                      BwdWorkspace& ws) {
  const int64_t D = d.D;
  const int64_t kv_stride = d.Hkv * D;
  const int64_t kv_offset = (b * d.T * d.Hkv + kvh) * D;
  const float* k = attention::rows_to_f32(t.k + kv_offset, kv_stride, d.T, D, ws.k_rows);
  transpose_to_f32(t.k + kv_offset, kv_stride, d.T, D, ws.k_t, ws.t_ld);
  transpose_to_f32(t.v + kv_offset, kv_stride, d.T, D, ws.v_t, ws.t_ld);
  std::memset(ws.dk, 0, sizeof(float) * size_t(d.T * D));
  std::memset(ws.dv, 0, sizeof(float) * size_t(d.T * D));
  for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h)
    for (int64_t qb = 0; qb < d.query_blocks(); ++qb)
      backward_query_block(t, d, scale, b, h, qb, k, ws);
  attention::store_rows(t.dk + kv_offset, kv_stride, ws.dk, d.T, D);
  attention::store_rows(t.dv + kv_offset, kv_stride, ws.dv, d.T, D);
}

template <class T>
void attention_bwd_typed(const AttentionBwdArgs& args, const Dims& d, Stream& stream) {
  const BwdTensors<T> t{args.dq.data_as<T>(),   args.dk.data_as<T>(),  args.dv.data_as<T>(),
                        args.dout.data_as<T>(), args.q.data_as<T>(),   args.k.data_as<T>(),
                        args.v.data_as<T>(),    args.out.data_as<T>(), args.lse.data_as<float>()};
  const float scale = d.softmax_scale(args.scale);
  const int64_t tasks = d.B * d.Hkv;
  const int threads = kernel_threads();
  const int64_t per_thread = attention::whole_cache_lines(BwdWorkspace::floats(d));
  ScratchBuffer<float> scratch(stream, size_t(threads * per_thread));
#pragma omp parallel num_threads(threads)
  {
    BwdWorkspace ws(scratch.data() + omp_get_thread_num() * per_thread, d);
    if (attention::heads_split_evenly(tasks, threads)) {
      const int64_t count = omp_get_num_threads(), me = omp_get_thread_num();
      for (int64_t task = tasks * me / count; task < tasks * (me + 1) / count; ++task)
        backward_kv_head(t, d, scale, task / d.Hkv, task % d.Hkv, ws);
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task)
        backward_kv_head(t, d, scale, task / d.Hkv, task % d.Hkv, ws);
    }
  }
}

void check_like(const Tensor& grad, const char* grad_name, const Tensor& x, const char* x_name) {
  H2_CHECK(grad.shape() == x.shape() && grad.dtype() == x.dtype(),
           "cpu attention_bwd: {} {} {} must match {} {} {}", grad_name, dtype_name(grad.dtype()),
           grad.shape().str(), x_name, dtype_name(x.dtype()), x.shape().str());
}

}  // namespace

// dout, q, out: (B, T, H, D), k, v: (B, T, Hkv, D), lse: (B, H, T) f32 -> dq, dk, dv like q, k, v.
void attention_bwd(const AttentionBwdArgs& args, Stream& stream) {
  const Dims d = attention::check_qkv("attention_bwd", args.q, args.k, args.v);
  check_like(args.dq, "dq", args.q, "q");
  check_like(args.dk, "dk", args.k, "k");
  check_like(args.dv, "dv", args.v, "v");
  check_like(args.dout, "dout", args.q, "q");
  check_like(args.out, "out", args.q, "q");
  attention::check_lse("attention_bwd", args.lse, d);
  const std::initializer_list<const Tensor*> inputs = {&args.dout, &args.q,   &args.k,
                                                       &args.v,    &args.out, &args.lse};
  attention::check_no_overlap("attention_bwd", args.dq, "dq", inputs);
  attention::check_no_overlap("attention_bwd", args.dk, "dk", inputs);
  attention::check_no_overlap("attention_bwd", args.dv, "dv", inputs);
  if (d.B == 0 || d.T == 0 || d.H == 0) return;
  H2_CHECK(d.D > 0, "cpu attention_bwd: head dim D is 0 in q {}", args.q.shape().str());
  visit_float_dtype(args.q.dtype(), "attention_bwd",
                    [&](auto tag) { attention_bwd_typed<decltype(tag)>(args, d, stream); });
}

}  // namespace h2::cpu
