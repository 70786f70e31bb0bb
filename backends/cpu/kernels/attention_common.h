// Pieces shared by the CPU flash-attention kernels (attention_fwd.cpp, attention_bwd.cpp): block
// sizes, shape checks, and moving blocks of head rows between the (B, T, H, D) tensors and f32.
// Glossary: B batch, T sequence, H query heads, Hkv key/value heads (query head h reads kv head
// h / G, G = H / Hkv), D head dim. "Scores" are scale * q.k, the softmax's inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backends/cpu/kernels/cpu_floats.h"
#include "core/error.h"
#include "core/tensor.h"

namespace h2::cpu::attention {

// A task's query rows come in blocks of kQueryBlock; keys stream past them in chunks of
// kKeyBlock, so per-thread memory is O(kQueryBlock * (kKeyBlock + D)) whatever T is. With the
// register tiles of attention_tiles.h (h2_bench_kernels --sections attention, f32, 2-core Zen 5
// EPYC, its AVX2 and AVX-512 paths): chunks of 256 keys ran level with 512 from T = 128 to 2048;
// query blocks of 32 lost up to 10% at T = 2048, and 128 ran level with 64 within the noise of
// alternating runs. (Through OpenBLAS, which packs both operands on every call and computes the
// masked scores, 64 x 512 had won by more.) Chunks a multiple of kQueryBlock start at or before
// any block they serve, so every row sees at least one key of every chunk it visits.
inline constexpr int64_t kQueryBlock = 64;
inline constexpr int64_t kKeyBlock = 512;
static_assert(kKeyBlock % kQueryBlock == 0);

// The row stride, in floats, of a workspace whose rows hold `n` values: n rounded up to an odd
// number of 64-byte lines, so that consecutive rows start in different L1 sets and any 64 of
// them cover every set. Rows a power of two apart share a few sets: 32 rows of a (D, 512)
// transposed key chunk 2 KiB apart fall into two of the 64, more than their 12 ways hold, and a
// tile's column of B missed on every row (the AVX-512 forward at T = 2048: 33 -> 23 ms).
inline constexpr int64_t padded_row(int64_t n) {
  return ((n + 15) / 16 | 1) * 16;
}

// Whether `heads` (batch entries times heads, b-major, as the tensors lay them out) share out
// evenly among `threads`: then each thread takes a contiguous run of them, the heads of the token
// rows the kernels before and after attention give that thread, instead of whichever head a
// dynamic schedule hands it.
inline bool heads_split_evenly(int64_t heads, int64_t threads) {
  return heads % threads == 0;
}

struct Dims {
  int64_t B = 0, T = 0, H = 0, Hkv = 0, D = 0;
  int64_t group() const { return H / Hkv; }  // query heads per kv head
  int64_t query_blocks() const { return (T + kQueryBlock - 1) / kQueryBlock; }
  // The row stride of a block's scores: a key chunk's width, at most T, padded.
  int64_t chunk_ld() const { return padded_row(T < kKeyBlock ? T : kKeyBlock); }
  // The softmax scale: the op's, or 1/sqrt(D) when that is 0.
  float softmax_scale(float scale) const {
    return scale == 0 ? float(1.0 / std::sqrt(double(D))) : scale;
  }
};

inline bool same_shape(const Tensor& t, const Shape& s) {
  return t.shape() == s;
}

// Per-thread workspace sizes round up to whole 64-byte lines: threads never share a line.
inline int64_t whole_cache_lines(int64_t floats) {
  return (floats + 15) / 16 * 16;
}

// Checks q (B, T, H, D), k and v (B, T, Hkv, D) with H % Hkv == 0, and one dtype for the three.
inline Dims check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  H2_CHECK(q.rank() == 4 && k.rank() == 4, "cpu {}: q {} and k {} must be (B, T, H, D)", op,
           q.shape().str(), k.shape().str());
  Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  H2_CHECK(k.size(0) == d.B && k.size(1) == d.T && k.size(3) == d.D && same_shape(v, k.shape()),
           "cpu {}: q {} needs k and v of shape (B, T, Hkv, D); got k {}, v {}", op,
           q.shape().str(), k.shape().str(), v.shape().str());
  H2_CHECK((d.H == 0 && d.Hkv == 0) || (d.Hkv > 0 && d.H % d.Hkv == 0),
           "cpu {}: H = {} query heads is not a multiple of Hkv = {} kv heads", op, d.H, d.Hkv);
  H2_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), "cpu {}: q {}, k {}, v {} differ", op,
           dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  return d;
}

// Checks that an output shares no memory with the op's inputs (blocks are read after others
// have been written).
inline void check_no_overlap(const char* op, const Tensor& out, const char* name,
                             std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* in : inputs)
    H2_CHECK(!out.may_alias(*in), "cpu {}: output {} {} overlaps an input", op, name,
             out.shape().str());
}

// Checks a saved logsumexp: lse (B, H, T) f32.
inline void check_lse(const char* op, const Tensor& lse, const Dims& d) {
  H2_CHECK(lse.dtype() == DType::f32 && same_shape(lse, Shape{d.B, d.H, d.T}),
           "cpu {}: lse must be f32 ({}, {}, {}) = (B, H, T); got {} {}", op, d.B, d.H, d.T,
           dtype_name(lse.dtype()), lse.shape().str());
}

// Rows of one head, `stride` elements apart in a (B, T, heads, D) tensor, copied as f32 into
// `buffer` (rows * D floats, rows D apart), which it returns. f32 rows are copied too: read in
// place, 512 B to 3 KiB apart, a block's rows fell into a few L1 sets and missed (a layer's f32
// forward 8-10% slower at T = 128 and 256).
template <class T>
const float* rows_to_f32(const T* first, int64_t stride, int64_t rows, int64_t D, float* buffer) {
  for (int64_t r = 0; r < rows; ++r) to_floats(first + r * stride, D, buffer + r * D);
  return buffer;
}

// Stores `rows` f32 rows of D values (packed, D apart) into rows `stride` apart, rounding.
template <class T>
void store_rows(T* first, int64_t stride, const float* src, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; ++r) from_floats(src + r * D, D, first + r * stride);
}

// The causal mask inside one (query block, key chunk) pair: query row i (position q0 + i) sees
// keys up to q0 + i, so this many of the chunk's `cols` keys starting at position k0 (all of
// them in a chunk that ends at or before the block's first query).
inline int64_t visible_keys(int64_t q0, int64_t i, int64_t k0, int64_t cols) {
  const int64_t n = q0 + i - k0 + 1;
  return n < 0 ? 0 : (n > cols ? cols : n);
}

}  // namespace h2::cpu::attention
