// Embedding lookup and its gradient. Shapes: table, dtable (V, C); ids (N...) i32/i64 in
// [0, V); out, dout (N..., C). Forward copies rows (through FP32, so table and out may differ
// in dtype). Backward is deterministic and rounds each touched row once: the ids are sorted
// (stable radix sort: positions stay ascending within one id), then one block per distinct id
// adds that id's dout rows in FP32 in token order and adds the sum into dtable. Ids outside
// [0, V) (a caller bug) are skipped instead of writing out of bounds.
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <climits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace h2::cuda {
namespace {

__global__ void embedding_fwd_kernel(FloatPtr out, FloatPtr table, IndexPtr ids, int64_t vocab,
                                     int64_t channels, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t row = i / channels, c = i - row * channels;
    const int64_t id = ids.get(row);
    out.set(i, id >= 0 && id < vocab ? table.get(id * channels + c) : 0.0f);
  }
}

// keys[n] = ids[n] as unsigned (vocab for ids out of range), positions[n] = n.
__global__ void sort_input_kernel(uint32_t* keys, int32_t* positions, IndexPtr ids, int64_t vocab,
                                  int64_t tokens) {
  for (int64_t i = first_index(); i < tokens; i += grid_stride()) {
    const int64_t id = ids.get(i);
    keys[i] = uint32_t(id >= 0 && id < vocab ? id : vocab);
    positions[i] = int32_t(i);
  }
}

// One block per sorted position; the block at the head of each run of equal keys sums the run.
__global__ void embedding_bwd_kernel(FloatPtr dtable, FloatPtr dout, const uint32_t* keys,
                                     const int32_t* positions, uint32_t vocab, int64_t channels,
                                     int64_t tokens) {
  const int64_t head = blockIdx.x;
  const uint32_t key = keys[head];
  if (key >= vocab || (head > 0 && keys[head - 1] == key)) return;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    float acc = 0;
    for (int64_t j = head; j < tokens && keys[j] == key; ++j)
      acc += dout.get(int64_t(positions[j]) * channels + c);
    const int64_t at = int64_t(key) * channels + c;
    dtable.set(at, dtable.get(at) + acc);
  }
}

}  // namespace

// table: (V, C), ids: (N...) -> out: (N..., C).
void embedding_fwd(const EmbeddingFwdArgs& args, Stream& stream) {
  const char* op = "embedding_fwd";
  H2_CUDA_REQUIRE(args.table.rank() == 2 && args.out.rank() == args.ids.rank() + 1 &&
                      args.out.size(-1) == args.table.size(1),
                  str_cat("cuda embedding_fwd: table ", args.table.shape().str(), ", ids ",
                          args.ids.shape().str(), ", out ", args.out.shape().str()));
  for (int d = 0; d < args.ids.rank(); ++d)
    H2_CUDA_REQUIRE(args.out.size(d) == args.ids.size(d), "cuda embedding_fwd: out vs ids");
  const int64_t n = args.out.numel();
  if (n == 0) return;
  Launch launch(stream);
  embedding_fwd_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
      float_ptr(args.out, op, "out"), float_ptr(args.table, op, "table"),
      index_ptr(args.ids, op, "ids"), args.table.size(0), args.table.size(1), n);
  H2_CUDA_LAUNCH_CHECK();
}

// dout: (N..., C), ids: (N...) -> dtable: (V, C) += scatter.
void embedding_bwd(const EmbeddingBwdArgs& args, Stream& stream) {
  const char* op = "embedding_bwd";
  H2_CUDA_REQUIRE(args.dtable.rank() == 2 && args.dout.rank() == args.ids.rank() + 1 &&
                      args.dout.size(-1) == args.dtable.size(1),
                  str_cat("cuda embedding_bwd: dtable ", args.dtable.shape().str(), ", ids ",
                          args.ids.shape().str(), ", dout ", args.dout.shape().str()));
  const int64_t tokens = args.ids.numel();
  const int64_t vocab = args.dtable.size(0), channels = args.dtable.size(1);
  if (tokens == 0 || channels == 0) return;
  H2_CUDA_REQUIRE(tokens < INT_MAX && vocab < INT_MAX,
                  str_cat("cuda embedding_bwd: ", tokens, " ids or vocabulary ", vocab,
                          " beyond 32-bit sort keys"));
  Launch launch(stream);
  const cudaStream_t s = launch.stream();
  Scratch<uint32_t> keys_in(stream, size_t(tokens)), keys_out(stream, size_t(tokens));
  Scratch<int32_t> pos_in(stream, size_t(tokens)), pos_out(stream, size_t(tokens));
  sort_input_kernel<<<grid_for(tokens), kThreads, 0, s>>>(
      keys_in.data(), pos_in.data(), index_ptr(args.ids, op, "ids"), vocab, tokens);
  H2_CUDA_LAUNCH_CHECK();
  const int end_bit = std::max(1, int(std::bit_width(uint64_t(vocab))));  // keys <= vocab
  size_t temp_bytes = 0;
  H2_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.data(),
                                                keys_out.data(), pos_in.data(), pos_out.data(),
                                                int(tokens), 0, end_bit, s));
  Scratch<char> temp(stream, std::max<size_t>(temp_bytes, 1));  // null would mean "query size"
  H2_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, keys_in.data(),
                                                keys_out.data(), pos_in.data(), pos_out.data(),
                                                int(tokens), 0, end_bit, s));
  const int threads = int(std::clamp<int64_t>((channels + 31) / 32 * 32, 32, kThreads));
  embedding_bwd_kernel<<<unsigned(tokens), threads, 0, s>>>(
      float_ptr(args.dtable, op, "dtable"), float_ptr(args.dout, op, "dout"), keys_out.data(),
      pos_out.data(), uint32_t(vocab), channels, tokens);
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
