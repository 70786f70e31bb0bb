// Where the rows of a tensor with dense rows (Tensor::has_dense_rows) start, for the kernels that
// take such views (a head or column slice of a fused projection's output) besides contiguous
// tensors. Rows run over every dimension but the last, in order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace h2::cpu {

class RowStarts {
 public:
  RowStarts(const Tensor& t, const char* op, const char* name)
      : row_length_(t.rank() == 0 ? 1 : t.size(-1)), contiguous_(t.is_contiguous()) {
    H2_CHECK(t.has_dense_rows(), "cpu {}: {} {} with strides {} has no dense rows", op, name,
             t.shape().str(), t.strides().str());
    for (int d = 0; d + 1 < t.rank(); ++d)
      sizes_[size_t(d)] = t.size(d), strides_[size_t(d)] = t.stride(d);
    outer_ = t.rank() == 0 ? 0 : t.rank() - 1;
  }

  // The element offset, from the tensor's data(), of row `row`.
  int64_t operator()(int64_t row) const {
    if (contiguous_) return row * row_length_;
    int64_t offset = 0;
    for (int d = outer_ - 1; d >= 0; --d) {
      const int64_t size = sizes_[size_t(d)];
      offset += row % size * strides_[size_t(d)];
      row /= size;
    }
    return offset;
  }
  bool contiguous() const { return contiguous_; }

 private:
  int outer_ = 0;
  std::array<int64_t, Shape::kMaxDims> sizes_{}, strides_{};
  int64_t row_length_;
  bool contiguous_;
};

// Calls chunk(offsets, n) in parallel over the elements of same-shaped tensors with dense rows of
// `row_length` elements, in chunks of at most kChunk elements that lie within one row of every
// tensor; offsets[i] is the element offset of the chunk's first element in the i-th tensor.
// Contiguous tensors go in the chunks parallel_chunks makes of their flat elements. `cost` as
// parallel_for's, per element.
template <size_t N, class Chunk>
void for_each_row_chunk(const std::array<RowStarts, N>& tensors, int64_t numel, int64_t row_length,
                        int64_t cost, Chunk&& chunk) {
  if (numel == 0) return;
  if (std::all_of(tensors.begin(), tensors.end(),
                  [](const RowStarts& t) { return t.contiguous(); })) {
    parallel_chunks(numel, kChunk, cost, [&](int64_t begin, int64_t n) {
      std::array<int64_t, N> at;
      at.fill(begin);
      chunk(at, n);
    });
    return;
  }
  parallel_for(numel / row_length, row_length * cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::array<int64_t, N> first;
      for (size_t i = 0; i < N; ++i) first[i] = tensors[i](r);
      for (int64_t c = 0; c < row_length; c += kChunk) {
        std::array<int64_t, N> at;
        for (size_t i = 0; i < N; ++i) at[i] = first[i] + c;
        chunk(at, std::min(kChunk, row_length - c));
      }
    }
  });
}

}  // namespace h2::cpu
