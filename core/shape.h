// Shape: up to kMaxDims extents, stored inline (no allocation on the hot path). Also used for
// strides, counted in elements. Glossary used across H2: B batch, T sequence, C channels, H heads,
// D head dim, V vocab, L layers, M micro-batches, P pipeline stages.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace h2 {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int d) const { return dims_[d]; }
  int64_t& operator[](int d) { return dims_[d]; }
  // Negative d counts from the end (-1 is the last dim); throws on out-of-range.
  int64_t size(int d) const { return dims_[normalize_dim(d)]; }
  int normalize_dim(int d) const;
  int64_t numel() const;
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  void push_back(int64_t extent);
  bool operator==(const Shape& other) const;

  // Row-major strides of a contiguous tensor of this shape.
  Shape contiguous_strides() const;
  std::string str() const;  // "(2, 3, 4)"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

}  // namespace h2
