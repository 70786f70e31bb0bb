// copy and fill for tensors of any strides (kStrided ops), any rank up to Shape::kMaxDims.
// Shapes: out, in: (any...), equal. A same-dtype copy moves raw element bits (exact for every
// dtype, integers included); f32/bf16/f16 conversions go through FP32 and round to nearest even.
// Fast paths: a contiguous same-dtype copy is one cudaMemcpyAsync, a contiguous zero fill one
// cudaMemsetAsync. Dims contiguous in every operand are merged first (most views end at rank
// 1-2); the shape and strides travel to the kernel by value in a small Layout struct.
#include <bit>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"
#include "core/half_float.h"

namespace h2::cuda {
namespace {

constexpr int kMaxRank = Shape::kMaxDims;

// The iteration space of one or two same-shape tensors: shared extents, per-operand strides.
struct Layout {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[2][kMaxRank] = {};  // [operand][dim], in elements
};

// Drops extent-1 dims and merges each dim into its outer neighbour where that is contiguous
// for both operands (`b` may be null: one operand).
Layout make_layout(const Tensor& a, const Tensor* b) {
  Layout l;
  for (int d = 0; d < a.rank(); ++d) {
    if (a.size(d) == 1) continue;
    l.shape[l.rank] = a.size(d);
    l.stride[0][l.rank] = a.stride(d);
    l.stride[1][l.rank] = b != nullptr ? b->stride(d) : 0;
    ++l.rank;
  }
  if (l.rank == 0) return l;
  int last = 0;
  for (int d = 1; d < l.rank; ++d) {
    bool merge = true;
    for (int o = 0; o < 2; ++o) merge = merge && l.stride[o][last] == l.shape[d] * l.stride[o][d];
    if (merge) {
      l.shape[last] *= l.shape[d];
    } else {
      ++last;
      l.shape[last] = l.shape[d];
    }
    for (int o = 0; o < 2; ++o) l.stride[o][last] = l.stride[o][d];
  }
  l.rank = last + 1;
  return l;
}

// Element offsets of the row-major `linear` index in both operands.
__device__ __forceinline__ void offsets(const Layout& l, int64_t linear, int64_t& o0, int64_t& o1) {
  o0 = 0;
  o1 = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    int64_t extent = l.shape[d];
    int64_t i = linear % extent;
    linear /= extent;
    o0 += i * l.stride[0][d];
    o1 += i * l.stride[1][d];
  }
}

template <class Word>
__global__ void copy_raw_kernel(Word* out, const Word* in, Layout l, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t o, s;
    offsets(l, i, o, s);
    out[o] = in[s];
  }
}

__global__ void copy_convert_kernel(FloatPtr out, FloatPtr in, Layout l, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t o, s;
    offsets(l, i, o, s);
    out.set(o, in.get(s));
  }
}

template <class Word>
__global__ void fill_kernel(Word* out, Word pattern, Layout l, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t o, unused;
    offsets(l, i, o, unused);
    out[o] = pattern;
  }
}

// Calls fn(Word{}) with an unsigned integer type as wide as one element of `dtype`.
template <class Fn>
void visit_word(DType dtype, const char* op, Fn&& fn) {
  switch (dtype_bits(dtype)) {
    case 8:
      fn(uint8_t{});
      return;
    case 16:
      fn(uint16_t{});
      return;
    case 32:
      fn(uint32_t{});
      return;
    case 64:
      fn(uint64_t{});
      return;
    default:
      throw_unsupported(
          __FILE__, __LINE__,
          str_cat("cuda ", op, ": dtype ", dtype_name(dtype), " is not a whole number of bytes"));
  }
}

// The storage bits of `value` rounded to `dtype` (as the CPU backend rounds it).
uint64_t fill_pattern(DType dtype, double value) {
  switch (dtype) {
    case DType::f32:
      return std::bit_cast<uint32_t>(float(value));
    case DType::bf16:
      return f32_to_bf16(float(value));
    case DType::f16:
      return f32_to_f16(float(value));
    case DType::i32:
      return uint32_t(int32_t(value));
    case DType::i64:
      return uint64_t(int64_t(value));
    case DType::u8:
      return uint8_t(value);
    default:
      throw_unsupported(__FILE__, __LINE__,
                        str_cat("cuda fill: dtype ", dtype_name(dtype), " is not supported"));
  }
}

}  // namespace

// out: (any...) <- in: (any...), same shape; any strides; dtypes equal or both floating.
void copy(const CopyArgs& args, Stream& stream) {
  const Tensor& out = args.out;
  const Tensor& in = args.in;
  require_same_shape(out, in, "copy", "out", "in");
  const int64_t n = out.numel();
  if (n == 0) return;
  Launch launch(stream);
  const bool same_dtype = out.dtype() == in.dtype();
  if (same_dtype && out.is_contiguous() && in.is_contiguous()) {
    if (out.data() != in.data())
      H2_CUDA_CHECK(cudaMemcpyAsync(out.data(), in.data(), size_t(out.nbytes()),
                                    cudaMemcpyDeviceToDevice, launch.stream()));
    return;
  }
  const Layout layout = make_layout(out, &in);
  if (same_dtype) {
    visit_word(out.dtype(), "copy", [&](auto word) {
      using Word = decltype(word);
      copy_raw_kernel<Word><<<grid_for(n), kThreads, 0, launch.stream()>>>(
          static_cast<Word*>(out.data()), static_cast<const Word*>(in.data()), layout, n);
    });
  } else {
    copy_convert_kernel<<<grid_for(n), kThreads, 0, launch.stream()>>>(
        float_ptr(out, "copy", "out"), float_ptr(in, "copy", "in"), layout, n);
  }
  H2_CUDA_LAUNCH_CHECK();
}

// out: (any...) = value, rounded to out's dtype; any strides.
void fill(const FillArgs& args, Stream& stream) {
  const Tensor& out = args.out;
  const int64_t n = out.numel();
  if (n == 0) return;
  const uint64_t pattern = fill_pattern(out.dtype(), args.value);
  Launch launch(stream);
  if (pattern == 0 && out.is_contiguous()) {
    H2_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, size_t(out.nbytes()), launch.stream()));
    return;
  }
  const Layout layout = make_layout(out, nullptr);
  visit_word(out.dtype(), "fill", [&](auto word) {
    using Word = decltype(word);
    fill_kernel<Word><<<grid_for(n), kThreads, 0, launch.stream()>>>(static_cast<Word*>(out.data()),
                                                                     Word(pattern), layout, n);
  });
  H2_CUDA_LAUNCH_CHECK();
}

}  // namespace h2::cuda
