// Tensor views, copies and cross-device byte transfers (see tensor.h).
#include "core/tensor.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/ranges.h>
#include "core/error.h"
#include "core/ops.h"

namespace h2 {

Storage::Storage(Device& device, size_t bytes)
    : device_(&device), data_(device.allocator().allocate(bytes)), bytes_(bytes), owned_(true) {}

Storage::Storage(Device& device, void* external, size_t bytes)
    : device_(&device), data_(external), bytes_(bytes), owned_(false) {}

Storage::~Storage() {
  if (owned_ && data_ != nullptr) device_->allocator().deallocate(data_, bytes_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device& device) {
  H2_CHECK(shape.numel() <= (int64_t(1) << 58), "tensor {} {} is larger than any device memory",
           dtype_name(dtype), shape.str());
  Tensor t;
  t.storage_ = std::make_shared<Storage>(device, size_t(dtype_storage_bytes(dtype, shape.numel())));
  t.shape_ = shape;
  t.strides_ = shape.contiguous_strides();
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device& device) {
  Tensor t = empty(shape, dtype, device);
  ops::fill({.out = t, .value = 0.0});
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device& device) {
  Tensor t;
  t.storage_ =
      std::make_shared<Storage>(device, data, size_t(dtype_storage_bytes(dtype, shape.numel())));
  t.shape_ = shape;
  t.strides_ = shape.contiguous_strides();
  t.dtype_ = dtype;
  return t;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

bool Tensor::may_alias(const Tensor& other) const {
  if (!defined() || !other.defined() || storage_ != other.storage_) return false;
  auto extent = [](const Tensor& t) {
    int64_t last = t.offset_;
    for (int d = 0; d < t.rank(); ++d) last += (t.shape_[d] - 1) * t.strides_[d];
    return std::pair{t.offset_, last};
  };
  if (numel() == 0 || other.numel() == 0) return false;
  auto [a0, a1] = extent(*this);
  auto [b0, b1] = extent(other);
  return a0 <= b1 && b0 <= a1;
}

void* Tensor::data() const {
  H2_CHECK(defined(), "data() of an undefined tensor");
  if (dtype_ == DType::f4e2m1)
    H2_CHECK(offset_ % 2 == 0 && is_contiguous(),
             "f4e2m1 tensors pack two elements per byte: this view (offset {}, strides {}) is not "
             "byte-addressable",
             offset_, strides_.str());
  return static_cast<char*>(storage_->data()) + dtype_storage_bytes(dtype_, offset_);
}

void Tensor::check_element_size(size_t bytes) const {
  H2_CHECK(int(bytes * 8) == dtype_bits(dtype_), "data_as<{}-byte type> on a {} tensor", bytes,
           dtype_name(dtype_));
}

Tensor Tensor::view(std::initializer_list<int64_t> shape) const {
  return view(std::span<const int64_t>(shape.begin(), shape.size()));
}

Tensor Tensor::view(std::span<const int64_t> extents) const {
  auto requested = [&] { return fmt::format("({})", fmt::join(extents, ", ")); };
  H2_CHECK(is_contiguous(), "view of a non-contiguous tensor {}", str());
  H2_CHECK(extents.size() <= size_t(Shape::kMaxDims), "view with {} dims", extents.size());
  int inferred = -1;
  int64_t known = 1;
  for (size_t d = 0; d < extents.size(); ++d) {
    if (extents[d] == -1) {
      H2_CHECK(inferred < 0, "view {} has more than one -1", requested());
      inferred = int(d);
    } else {
      H2_CHECK(extents[d] >= 0, "view {} has a negative extent", requested());
      known *= extents[d];
    }
  }
  Shape resolved;
  for (size_t d = 0; d < extents.size(); ++d) {
    if (int(d) != inferred) {
      resolved.push_back(extents[d]);
      continue;
    }
    H2_CHECK(known > 0 && numel() % known == 0, "cannot view {} as {}", shape_.str(), requested());
    resolved.push_back(numel() / known);
  }
  H2_CHECK(resolved.numel() == numel(), "cannot view {} ({} elements) as {}", shape_.str(), numel(),
           requested());
  Tensor t = *this;
  t.shape_ = resolved;
  t.strides_ = resolved.contiguous_strides();
  return t;
}

Tensor Tensor::slice(int dim, int64_t start, int64_t end) const {
  int d = shape_.normalize_dim(dim);
  H2_CHECK(0 <= start && start <= end && end <= shape_[d],
           "slice [{}, {}) of dim {} with extent {}", start, end, dim, shape_[d]);
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int dim, int64_t index) const {
  int d = shape_.normalize_dim(dim);
  H2_CHECK(0 <= index && index < shape_[d], "select index {} of dim {} with extent {}", index, dim,
           shape_[d]);
  Tensor t;
  t.storage_ = storage_;
  t.dtype_ = dtype_;
  t.offset_ = offset_ + index * strides_[d];
  for (int i = 0; i < rank(); ++i) {
    if (i == d) continue;
    t.shape_.push_back(shape_[i]);
    t.strides_.push_back(strides_[i]);
  }
  return t;
}

Tensor Tensor::transpose(int dim0, int dim1) const {
  int a = shape_.normalize_dim(dim0), b = shape_.normalize_dim(dim1);
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::permute(std::initializer_list<int> order) const {
  H2_CHECK(int(order.size()) == rank(), "permute of rank {} with {} dims", rank(), order.size());
  Tensor t = *this;
  std::vector<bool> seen(rank(), false);
  int i = 0;
  for (int o : order) {
    int d = shape_.normalize_dim(o);
    H2_CHECK(!seen[d], "permute repeats dim {}", o);
    seen[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
    ++i;
  }
  return t;
}

Tensor Tensor::contiguous(Stream* stream) const {
  if (is_contiguous()) return *this;
  Tensor out = empty(shape_, dtype_, device());
  ops::copy({.out = out, .in = *this}, stream);
  return out;
}

Device& Tensor::device() const {
  H2_CHECK(defined(), "device() of an undefined tensor");
  return storage_->device();
}

Tensor Tensor::to(Device& target) const {
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, target);
  copy_bytes(target, out.data(), src.device(), src.data(), size_t(src.nbytes()));
  return out;
}

Tensor Tensor::to(DType dtype) const {
  Tensor out = empty(shape_, dtype, device());
  ops::copy({.out = out, .in = *this});
  return out;
}

void Tensor::copy_from(const Tensor& src, Stream* stream) {
  H2_CHECK(shape_ == src.shape_, "copy_from shape {} into {}", src.shape_.str(), shape_.str());
  if (&src.device() == &device()) {
    ops::copy({.out = *this, .in = src}, stream);
    return;
  }
  H2_CHECK(dtype_ == src.dtype_, "cross-device copy_from {} into {}: convert dtype first",
           src.str(), str());
  H2_CHECK(dtype_ != DType::f4e2m1 || numel() % 2 == 0,
           "cross-device copy_from of {} f4e2m1 elements: an odd count would overwrite the "
           "neighbour sharing the last byte",
           numel());
  if (is_contiguous()) {
    // Bytes only: no kernel runs on this device, so this works for any dtype it can store.
    Tensor dense = src.contiguous();
    copy_bytes(device(), data(), dense.device(), dense.data(), size_t(nbytes()));
    return;
  }
  Tensor staged = src.to(device());
  ops::copy({.out = *this, .in = staged}, stream);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return fmt::format("Tensor({}, {}, {})", dtype_name(dtype_), shape_.str(), device().str());
}

void copy_bytes(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (&dst_device == &src_device) {
    dst_device.copy_bytes(dst, true, src, true, bytes, dst_device.default_stream());
  } else if (src_device.memory_kind() == MemoryKind::host) {
    dst_device.copy_bytes(dst, true, src, false, bytes, dst_device.default_stream());
  } else if (dst_device.memory_kind() == MemoryKind::host) {
    src_device.copy_bytes(dst, false, src, true, bytes, src_device.default_stream());
  } else {
    // Two device memories with no direct path: stage through host memory.
    std::vector<std::byte> staging(bytes);
    src_device.copy_bytes(staging.data(), false, src, true, bytes, src_device.default_stream());
    dst_device.copy_bytes(dst, true, staging.data(), false, bytes, dst_device.default_stream());
  }
}

}  // namespace h2
