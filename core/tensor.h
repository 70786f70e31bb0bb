// Tensor: a strided view of a Storage (one allocation on one device) with its own dtype.
// Copying a Tensor shares the storage (like a shared_ptr); views (slice, transpose, view, ...)
// share it too. Strides and offsets count elements. f4e2m1 tensors must be contiguous with an
// even element offset and, when copied across devices, an even element count, since two
// elements share a byte.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace h2 {

// One allocation on one device, returned to its allocator when the last tensor lets go.
class Storage {
 public:
  Storage(Device& device, size_t bytes);                  // allocates
  Storage(Device& device, void* external, size_t bytes);  // borrows: never freed here
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device& device() const { return *device_; }

 private:
  Device* device_;
  void* data_;
  size_t bytes_;
  bool owned_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: optional op arguments

  // Uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype, Device& device);
  // A tensor of zeros (through the fill op, so it works on every device).
  static Tensor zeros(const Shape& shape, DType dtype, Device& device);
  // Wraps memory the caller owns and keeps alive; `data` must be in `device`'s memory.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device& device);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device& device() const;  // throws on an undefined tensor
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int rank() const { return shape_.rank(); }
  int64_t size(int d) const { return shape_.size(d); }
  int64_t stride(int d) const { return strides_[shape_.normalize_dim(d)]; }
  int64_t numel() const { return shape_.numel(); }
  // Bytes the elements occupy when contiguous.
  int64_t nbytes() const { return dtype_storage_bytes(dtype_, numel()); }
  bool is_contiguous() const;
  // Whether two tensors may share bytes (same storage, overlapping extents).
  bool may_alias(const Tensor& other) const;

  // Address of element 0 in device memory. Host code may dereference it only when
  // device().memory_kind() is host.
  void* data() const;
  template <class T>
  T* data_as() const {
    check_element_size(sizeof(T));
    return static_cast<T*>(data());
  }

  // Views (no copy). view() needs a contiguous tensor; one extent may be -1 (inferred).
  Tensor view(std::initializer_list<int64_t> shape) const;
  Tensor view(const Shape& shape) const { return view(std::span(shape.begin(), shape.end())); }
  Tensor view(std::span<const int64_t> shape) const;
  Tensor slice(int dim, int64_t start, int64_t end) const;
  Tensor select(int dim, int64_t index) const;  // drops `dim`
  Tensor transpose(int dim0, int dim1) const;
  Tensor permute(std::initializer_list<int> order) const;

  // This tensor if contiguous, else a contiguous copy on the same device, made on `stream`
  // (default: the device's default stream).
  Tensor contiguous(Stream* stream = nullptr) const;
  // A contiguous copy on `device` (same dtype).
  Tensor to(Device& device) const;
  // A contiguous copy with another dtype, on the same device.
  Tensor to(DType dtype) const;
  // Copies src's elements into this tensor (same shape). Across devices the dtypes must match;
  // on one device the copy op converts dtypes and handles any strides. Kernels this needs on
  // this tensor's device run on `stream` (default: the device's default stream).
  void copy_from(const Tensor& src, Stream* stream = nullptr);

  std::string str() const;  // "Tensor(bf16, (2, 3), vchip:0)"

 private:
  void check_element_size(size_t bytes) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

// Copies `bytes` from src (on src_device) to dst (on dst_device) for any pair of devices:
// directly where one side is host memory or both are the same device, else staged through host.
void copy_bytes(Device& dst_device, void* dst, Device& src_device, const void* src, size_t bytes);

}  // namespace h2
