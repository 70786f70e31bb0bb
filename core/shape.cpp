// Shape helpers (see shape.h).
#include "core/shape.h"

#include <fmt/format.h>

#include "core/error.h"

namespace h2 {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims)) {}

Shape::Shape(std::span<const int64_t> dims) {
  H2_CHECK(dims.size() <= kMaxDims, "rank {} exceeds the maximum {}", dims.size(), kMaxDims);
  for (int64_t d : dims) push_back(d);
}

int Shape::normalize_dim(int d) const {
  int n = d < 0 ? d + rank_ : d;
  H2_CHECK(n >= 0 && n < rank_, "dim {} out of range for shape {}", d, str());
  return n;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : *this) {
    if (d == 0) return 0;
    H2_CHECK(!__builtin_mul_overflow(n, d, &n), "shape {} has more than 2^63 elements", str());
  }
  return n;
}

void Shape::push_back(int64_t extent) {
  H2_CHECK(rank_ < kMaxDims, "rank exceeds the maximum {}", kMaxDims);
  H2_CHECK(extent >= 0, "negative extent {}", extent);
  dims_[rank_++] = extent;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

Shape Shape::contiguous_strides() const {
  Shape strides;
  strides.rank_ = rank_;
  int64_t running = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    strides.dims_[i] = running;
    running *= dims_[i] > 0 ? dims_[i] : 1;
  }
  return strides;
}

std::string Shape::str() const {
  return fmt::format("({})", fmt::join(begin(), end(), ", "));
}

}  // namespace h2
