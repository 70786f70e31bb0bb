// Token embedding lookup and its gradient scatter. Every id is checked against the table before any
// row moves. The backward pass groups equal ids (sorted by id, then position) and sums each group
// in double before one update of the row: no write races, one rounding per row even for bf16
// tables, and a result independent of the thread count.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/scratch.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

// Checks table (V, C), ids (N...) i32/i64 in [0, V) and rows (N..., C); returns N.
int64_t check_lookup(const char* op, const Tensor& table, const char* table_name,
                     const Tensor& rows, const char* rows_name, const Tensor& ids) {
  H2_CHECK(table.defined() && rows.defined() && ids.defined(), "{}: {}, {} and ids must be defined",
           op, table_name, rows_name);
  H2_CHECK(table.rank() == 2, "{}: {} {} must be (V, C)", op, table_name, table.shape().str());
  H2_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
           "{}: ids dtype {} is not i32 or i64", op, dtype_name(ids.dtype()));
  Shape expected = ids.shape();
  expected.push_back(table.size(1));
  H2_CHECK(rows.shape() == expected, "{}: {} {} but ids {} and {} {} need {}", op, rows_name,
           rows.shape().str(), ids.shape().str(), table_name, table.shape().str(), expected.str());
  const int64_t n = ids.numel(), vocab = table.size(0);
  const void* id_data = n > 0 ? ids.data() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = load_index(id_data, ids.dtype(), i);
    H2_CHECK(id >= 0 && id < vocab, "{}: ids[{}] = {} is outside [0, V = {})", op, i, id, vocab);
  }
  return n;
}

}  // namespace

// table: (V, C), ids: (N...) -> out: (N..., C) = table[ids].
void embedding_fwd(const EmbeddingFwdArgs& args, Stream&) {
  const int64_t n = check_lookup("embedding_fwd", args.table, "table", args.out, "out", args.ids);
  const int64_t channels = args.table.size(1);
  if (n == 0 || channels == 0) return;
  const void* ids = args.ids.data();
  const DType id_dtype = args.ids.dtype();
  if (args.table.dtype() == args.out.dtype()) {
    const char* table = static_cast<const char*>(args.table.data());
    char* out = static_cast<char*>(args.out.data());
    const size_t row_bytes = size_t(dtype_storage_bytes(args.table.dtype(), channels));
    parallel_for(n, channels, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(out + i * row_bytes, table + load_index(ids, id_dtype, i) * row_bytes,
                    row_bytes);
    });
    return;
  }
  const FloatIn table(args.table, "embedding_fwd", "table");
  const FloatOut out(args.out, "embedding_fwd", "out");
  parallel_for(n, channels, [&](int64_t i0, int64_t i1) {
    float buf[kChunk];
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t src = load_index(ids, id_dtype, i) * channels, dst = i * channels;
      for (int64_t c = 0; c < channels; c += kChunk) {
        int64_t len = std::min(kChunk, channels - c);
        out.commit(dst + c, len, table.read(src + c, len, buf));
      }
    }
  });
}

// dout: (N..., C), ids: (N...) -> dtable: (V, C) += dout summed by id; other rows unchanged.
void embedding_bwd(const EmbeddingBwdArgs& args, Stream& stream) {
  const char* op = "embedding_bwd";
  const int64_t n = check_lookup(op, args.dtable, "dtable", args.dout, "dout", args.ids);
  const int64_t channels = args.dtable.size(1);
  if (n == 0 || channels == 0) return;
  H2_CHECK(n < (int64_t(1) << 32), "{}: {} ids exceed 2^32", op, n);
  const FloatIn dout(args.dout, op, "dout"), dtable_in(args.dtable, op, "dtable");
  const FloatOut dtable(args.dtable, op, "dtable");

  // Sort keys: id in the high 32 bits, position in the low 32, so each id's rows stay in order.
  ScratchBuffer<uint64_t> keys_buf(stream, size_t(n));
  uint64_t* keys = keys_buf.data();
  const void* ids = args.ids.data();
  for (int64_t i = 0; i < n; ++i)
    keys[i] = (uint64_t(load_index(ids, args.ids.dtype(), i)) << 32) | uint64_t(i);
  std::sort(keys, keys + n);
  ScratchBuffer<int64_t> starts_buf(stream, size_t(n) + 1);
  int64_t* starts = starts_buf.data();  // groups of equal ids: [starts[g], starts[g + 1])
  int64_t groups = 0;
  for (int64_t i = 0; i < n; ++i)
    if (i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32)) starts[groups++] = i;
  starts[groups] = n;

  parallel_for(groups, channels * std::max<int64_t>(1, n / groups), [&](int64_t g0, int64_t g1) {
    float row_buf[kChunk], in_buf[kChunk];
    double acc[kChunk];
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t row = int64_t(keys[starts[g]] >> 32) * channels;
      for (int64_t c = 0; c < channels; c += kChunk) {
        const int64_t len = std::min(kChunk, channels - c);
        const float* old = dtable_in.read(row + c, len, row_buf);
        for (int64_t j = 0; j < len; ++j) acc[j] = old[j];
        for (int64_t k = starts[g]; k < starts[g + 1]; ++k) {
          const float* d = dout.read(int64_t(keys[k] & 0xffffffffu) * channels + c, len, in_buf);
          for (int64_t j = 0; j < len; ++j) acc[j] += d[j];
        }
        float* out = dtable.target(row + c, row_buf);
        for (int64_t j = 0; j < len; ++j) out[j] = float(acc[j]);
        dtable.commit(row + c, len, out);
      }
    }
  });
}

}  // namespace h2::cpu
