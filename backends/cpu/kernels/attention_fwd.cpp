// CPU causal attention forward, flash-attention-2 style: each task owns one block of queries of
// one head and streams the visible keys past it in chunks through an online softmax, in
// O(kQueryBlock * (kKeyBlock + D)) memory per thread whatever T is. Scores and P @ V are
// register-tiled products (attention_tiles.h) over f32 copies of the block's q rows and the
// chunk's v rows (D apart) and the chunk's keys transposed; they skip the tiles past the diagonal
// and accumulate in f32 throughout. Where each thread runs whole heads, a kv head's keys are
// transposed and its v rows copied once, for all its query blocks and the heads of its group
// (O(T D) more per thread, as the backward keeps), instead of once per query block and chunk.
// Invariants: keys after a block's last query never enter its products; inside the chunk that
// holds the diagonal each row keeps only keys <= its position; every row sees key 0 in the first
// chunk, so its running max is finite from then on.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels/attention_common.h"
#include "backends/cpu/kernels/attention_tiles.h"
#include "backends/cpu/kernels/cpu_math.h"
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

// One thread's scratch, carved from a shared ScratchBuffer.
struct FwdWorkspace {
  int64_t ld;      // d.chunk_ld(): the row stride of scores and k_t
  float* scores;   // (kQueryBlock, kKeyBlock), rows ld apart: scores, then probabilities
  float* acc;      // (kQueryBlock, D): unnormalised output rows
  float* row_max;  // (kQueryBlock): running max of each row's scores
  float* row_sum;  // (kQueryBlock): running sum of exp(score - row_max)
  float* k_t;      // (D, kKeyBlock), rows ld apart: a key chunk transposed, the scores' B
  float* q_rows;   // (kQueryBlock, D): f32 copy of the block's q rows
  float* v_rows;   // (kKeyBlock, D): f32 copy of one key chunk's v rows
  // With whole heads (a thread's own heads, every query block of them): one kv head's keys
  // transposed and its v rows, made once for all its query blocks and the query heads of its
  // group instead of once per block and chunk. O(T D): as much as the backward keeps per head.
  int64_t head_ld;  // padded_row(T): the row stride of head_k_t
  float* head_k_t;  // (D, T), rows head_ld apart
  float* head_v;    // (T, D)

  static int64_t floats(const Dims& d, bool whole_heads) {
    return kQueryBlock * (d.chunk_ld() + d.D + 2) + d.D * d.chunk_ld() +
           (kQueryBlock + kKeyBlock) * d.D +
           (whole_heads ? d.D * attention::padded_row(d.T) + d.T * d.D : 0);
  }
  FwdWorkspace(float* base, const Dims& d, bool whole_heads)
      : ld(d.chunk_ld()),
        scores(base),
        acc(scores + kQueryBlock * ld),
        row_max(acc + kQueryBlock * d.D),
        row_sum(row_max + kQueryBlock),
        k_t(row_sum + kQueryBlock),
        q_rows(k_t + d.D * ld),
        v_rows(q_rows + kQueryBlock * d.D),
        head_ld(attention::padded_row(d.T)),
        head_k_t(whole_heads ? v_rows + kKeyBlock * d.D : nullptr),
        head_v(whole_heads ? head_k_t + d.D * head_ld : nullptr) {}
};

// The keys of a chunk as the block products read them: transposed (D, cols), rows ld apart, and
// v rows (cols, D).
struct ChunkKeys {
  const float* k_t = nullptr;
  int64_t ld = 0;
  const float* v = nullptr;
};

template <class T>
struct FwdTensors {
  const T* q;  // (B, T, H, D)
  const T* k;  // (B, T, Hkv, D)
  const T* v;  // (B, T, Hkv, D)
  T* out;      // (B, T, H, D)
  float* lse;  // (B, H, T)
};

// Folds one chunk's scores into the running softmax of `rows` query rows: turns the scores into
// probabilities exp(s - new max) in place (0 for masked keys), ready for P @ V, and rescales the
// earlier partial sums and output rows to the new max.
void online_softmax_step(FwdWorkspace& ws, int64_t D, int64_t rows, int64_t cols, int64_t q0,
                         int64_t k0, bool first_chunk) {
  for (int64_t i = 0; i < rows; ++i) {
    float* p = ws.scores + i * ws.ld;
    const int64_t n = attention::visible_keys(q0, i, k0, cols);
    const float chunk_max = max_f32(p, n);
    const float old_max = ws.row_max[i];
    const float new_max = (first_chunk || chunk_max > old_max) ? chunk_max : old_max;
    const float sum = exp_shifted_sum(p, n, new_max);
    std::fill(p + n, p + cols, 0.0f);
    if (first_chunk) {
      ws.row_sum[i] = sum;
    } else {
      const float rescale = exp_f32(old_max - new_max);
      ws.row_sum[i] = ws.row_sum[i] * rescale + sum;
      if (rescale != 1.0f) {
        float* acc = ws.acc + i * D;
#pragma omp simd
        for (int64_t c = 0; c < D; ++c) acc[c] *= rescale;
      }
    }
    ws.row_max[i] = new_max;
  }
}

// Makes ws.head_k_t and ws.head_v for kv head kvh of batch entry b.
template <class T>
void load_head_keys(const FwdTensors<T>& t, const Dims& d, int64_t b, int64_t kvh,
                    FwdWorkspace& ws) {
  const int64_t offset = (b * d.T * d.Hkv + kvh) * d.D, stride = d.Hkv * d.D;
  transpose_to_f32(t.k + offset, stride, d.T, d.D, ws.head_k_t, ws.head_ld);
  attention::rows_to_f32(t.v + offset, stride, d.T, d.D, ws.head_v);
}

// One task: query block qb of head h in batch entry b. whole_head: ws holds the kv head's keys
// (load_head_keys); otherwise each chunk's keys are transposed and copied here.
template <class T>
void forward_block(const FwdTensors<T>& t, const Dims& d, float scale, int64_t b, int64_t h,
                   int64_t qb, FwdWorkspace& ws, bool whole_head) {
  const int64_t D = d.D;
  const int64_t q_stride = d.H * D;
  const int64_t kv_stride = d.Hkv * D;
  const int64_t kvh = h / d.group();
  const int64_t q0 = qb * kQueryBlock;
  const int64_t rows = std::min(kQueryBlock, d.T - q0);
  const int64_t q_offset = ((b * d.T + q0) * d.H + h) * D;

  const float* q = attention::rows_to_f32(t.q + q_offset, q_stride, rows, D, ws.q_rows);
  for (int64_t k0 = 0; k0 < q0 + rows; k0 += kKeyBlock) {
    const int64_t cols = std::min(kKeyBlock, q0 + rows - k0);
    const int64_t kv_offset = ((b * d.T + k0) * d.Hkv + kvh) * D;
    const bool first_chunk = k0 == 0;
    const int64_t diagonal = q0 - k0;
    ChunkKeys keys;
    if (whole_head) {
      keys = {ws.head_k_t + k0, ws.head_ld, ws.head_v + k0 * D};
    } else {
      transpose_to_f32(t.k + kv_offset, kv_stride, cols, D, ws.k_t, ws.ld);
      keys = {ws.k_t, ws.ld,
              attention::rows_to_f32(t.v + kv_offset, kv_stride, cols, D, ws.v_rows)};
    }
    // S = scale * Q K^T: (rows, cols), up to each row's last key.
    attention::tile_product({.M = rows,
                             .N = cols,
                             .K = D,
                             .alpha = scale,
                             .masked = attention::Masked::columns,
                             .diagonal = diagonal},
                            {q, D, 1}, {keys.k_t, keys.ld}, ws.scores, ws.ld);
    online_softmax_step(ws, D, rows, cols, q0, k0, first_chunk);
    // acc (+)= P V, with the earlier acc already rescaled to the current row maxima.
    attention::tile_product({.M = rows,
                             .N = D,
                             .K = cols,
                             .accumulate = !first_chunk,
                             .masked = attention::Masked::k_after_diagonal,
                             .diagonal = diagonal},
                            {ws.scores, ws.ld, 1}, {keys.v, D}, ws.acc, D);
  }
  // out = acc / row_sum; lse = row_max + log(row_sum), the logsumexp of the row's scores.
  float* lse = t.lse + (b * d.H + h) * d.T + q0;
  for (int64_t i = 0; i < rows; ++i) {
    float* acc = ws.acc + i * D;
    const float inv_sum = 1.0f / ws.row_sum[i];
#pragma omp simd
    for (int64_t c = 0; c < D; ++c) acc[c] *= inv_sum;
    lse[i] = ws.row_max[i] + std::log(ws.row_sum[i]);
  }
  attention::store_rows(t.out + q_offset, q_stride, ws.acc, rows, D);
}

template <class T>
void attention_fwd_typed(const AttentionFwdArgs& args, const Dims& d, Stream& stream) {
  const FwdTensors<T> t{args.q.data_as<T>(), args.k.data_as<T>(), args.v.data_as<T>(),
                        args.out.data_as<T>(), args.lse.data_as<float>()};
  const float scale = d.softmax_scale(args.scale);
  const int64_t blocks = d.query_blocks();
  const int64_t heads = d.B * d.H;
  const int threads = kernel_threads();
  const bool by_rows = attention::heads_split_evenly(heads, threads);
  const int64_t per_thread = attention::whole_cache_lines(FwdWorkspace::floats(d, by_rows));
  ScratchBuffer<float> scratch(stream, size_t(threads * per_thread));
#pragma omp parallel num_threads(threads)
  {
    FwdWorkspace ws(scratch.data() + omp_get_thread_num() * per_thread, d, by_rows);
    if (by_rows) {
      // Each thread the heads of its own token rows, every query block of them, each kv head's
      // keys made once for the query heads of its group that the thread runs.
      const int64_t count = omp_get_num_threads(), me = omp_get_thread_num();
      int64_t loaded = -1;  // b * Hkv + kvh of the keys in ws
      for (int64_t bh = heads * me / count; bh < heads * (me + 1) / count; ++bh) {
        const int64_t b = bh / d.H, h = bh % d.H, kv_head = b * d.Hkv + h / d.group();
        if (kv_head != loaded) {
          load_head_keys(t, d, b, h / d.group(), ws);
          loaded = kv_head;
        }
        for (int64_t qb = 0; qb < blocks; ++qb) forward_block(t, d, scale, b, h, qb, ws, true);
      }
    } else {
      // Tasks in decreasing cost: all heads' last query blocks (which see every key) first, so
      // the dynamic schedule ends on short tasks and the threads finish together.
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < heads * blocks; ++task) {
        const int64_t qb = blocks - 1 - task / heads;
        const int64_t bh = task % heads;
        forward_block(t, d, scale, bh / d.H, bh % d.H, qb, ws, false);
      }
    }
  }
}

}  // namespace

// q: (B, T, H, D), k, v: (B, T, Hkv, D) -> out: (B, T, H, D), lse: (B, H, T) f32.
void attention_fwd(const AttentionFwdArgs& args, Stream& stream) {
  const Dims d = attention::check_qkv("attention_fwd", args.q, args.k, args.v);
  H2_CHECK(args.out.shape() == args.q.shape() && args.out.dtype() == args.q.dtype(),
           "cpu attention_fwd: out {} {} must match q {} {}", dtype_name(args.out.dtype()),
           args.out.shape().str(), dtype_name(args.q.dtype()), args.q.shape().str());
  attention::check_lse("attention_fwd", args.lse, d);
  attention::check_no_overlap("attention_fwd", args.out, "out", {&args.q, &args.k, &args.v});
  attention::check_no_overlap("attention_fwd", args.lse, "lse", {&args.q, &args.k, &args.v});
  if (d.B == 0 || d.T == 0 || d.H == 0) return;
  H2_CHECK(d.D > 0, "cpu attention_fwd: head dim D is 0 in q {}", args.q.shape().str());
  visit_float_dtype(args.q.dtype(), "attention_fwd",
                    [&](auto tag) { attention_fwd_typed<decltype(tag)>(args, d, stream); });
}

}  // namespace h2::cpu
