// copy and fill for tensors of any strides (kStrided ops: views arrive as they are). Dims are
// coalesced where both sides are contiguous, so dense tensors take one memcpy-speed pass. Copies
// of one dtype move raw bits (any whole-byte dtype, NaN payloads kept); f32/bf16/f16 convert to
// each other through FP32, rounding to nearest even. in may alias out only when both are the same
// view (a no-op); partially overlapping views are rejected.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels/cpu_floats.h"
#include "backends/cpu/kernels/cpu_parallel.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/transpose.h"
#include "core/error.h"

namespace h2::cpu {
namespace {

constexpr int kMaxDims = Shape::kMaxDims;
// Longest piece of an inner run one loop body handles, so one long row still spreads over threads.
constexpr int64_t kPiece = 1 << 14;

// The iteration space of a copy (operands 0 = out, 1 = in) or fill (both the same): extent-1 dims
// dropped and neighbouring dims merged where both operands step through them contiguously.
struct Walk {
  int rank = 0;
  int64_t size[kMaxDims];
  int64_t stride[2][kMaxDims];
};

Walk make_walk(const Shape& shape, const Shape& out_strides, const Shape& in_strides) {
  Walk w;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    int p = w.rank - 1;
    if (p >= 0 && w.stride[0][p] == out_strides[d] * shape[d] &&
        w.stride[1][p] == in_strides[d] * shape[d]) {
      w.size[p] *= shape[d];
      w.stride[0][p] = out_strides[d];
      w.stride[1][p] = in_strides[d];
    } else {
      w.size[w.rank] = shape[d];
      w.stride[0][w.rank] = out_strides[d];
      w.stride[1][w.rank] = in_strides[d];
      ++w.rank;
    }
  }
  if (w.rank == 0) {  // a single element
    w.rank = 1;
    w.size[0] = 1;
    w.stride[0][0] = w.stride[1][0] = 1;
  }
  return w;
}

// Calls fn(out_offset, in_offset, n) for every piece of every inner run (offsets in elements; the
// inner strides are w.stride[.][w.rank - 1]), threads taking contiguous ranges of pieces.
template <class Fn>
void for_each_run(const Walk& w, Fn&& fn) {
  const int last = w.rank - 1;
  const int64_t inner = w.size[last], pieces = ceil_div(inner, kPiece);
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= w.size[d];
  parallel_for(outer * pieces, std::min(inner, kPiece), [&](int64_t i0, int64_t i1) {
    int64_t index[kMaxDims] = {};
    int64_t off[2] = {0, 0};
    int64_t row = i0 / pieces, piece = i0 % pieces;
    for (int d = last - 1; d >= 0; --d) {
      index[d] = row % w.size[d];
      row /= w.size[d];
      for (int k = 0; k < 2; ++k) off[k] += index[d] * w.stride[k][d];
    }
    for (int64_t i = i0; i < i1; ++i) {
      int64_t begin = piece * kPiece;
      fn(off[0] + begin * w.stride[0][last], off[1] + begin * w.stride[1][last],
         std::min(kPiece, inner - begin));
      if (++piece < pieces) continue;
      piece = 0;
      for (int d = last - 1; d >= 0; --d) {  // next row: odometer over the outer dims
        for (int k = 0; k < 2; ++k) off[k] += w.stride[k][d];
        if (++index[d] < w.size[d]) break;
        for (int k = 0; k < 2; ++k) off[k] -= w.stride[k][d] * w.size[d];
        index[d] = 0;
      }
    }
  });
}

// A one-byte copy that transposes a matrix (FP8 codes taken as W^T or dy^T): out's inner dim
// contiguous, in's outer one. Then out (I, J) = in_t (J, I)^T with in_t's rows in.stride[1][1]
// apart, in 16 x 16 register tiles; threads take disjoint runs of 16 of out's rows. Any other
// walk, or too few rows to give every thread some: false (the general loop, which splits rows).
bool copy_transposed_bytes(const Walk& w, uint8_t* out, const uint8_t* in) {
  constexpr int64_t kTile = 16;
  if (w.rank != 2 || w.stride[0][1] != 1 || w.stride[1][0] != 1 || w.stride[1][1] == 1 ||
      ceil_div(w.size[0], kTile) < kernel_threads())
    return false;
  const int64_t I = w.size[0], J = w.size[1];
  parallel_for(ceil_div(I, kTile), kTile * J, [&](int64_t t0, int64_t t1) {
    transpose_bytes(in, w.stride[1][1], J, t0 * kTile, std::min(I, t1 * kTile), out,
                    w.stride[0][0]);
  });
  return true;
}

// Same-dtype copy of n elements of U (an unsigned integer of the element's size).
template <class U>
void copy_bits(U* out, int64_t out_stride, const U* in, int64_t in_stride, int64_t n) {
  if (out_stride == 1 && in_stride == 1) {
    std::memcpy(out, in, size_t(n) * sizeof(U));
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i * out_stride] = in[i * in_stride];
}

// Converting copy of n elements through an FP32 buffer.
template <class O, class I>
void copy_convert(O* out, int64_t out_stride, const I* in, int64_t in_stride, int64_t n) {
  float buf[kChunk];
  for (int64_t c = 0; c < n; c += kChunk) {
    int64_t len = std::min(kChunk, n - c);
    if (in_stride == 1) {
      to_floats(in + c, len, buf);
    } else {
      for (int64_t i = 0; i < len; ++i) buf[i] = load(in + (c + i) * in_stride);
    }
    if (out_stride == 1) {
      from_floats(buf, len, out + c);
    } else {
      for (int64_t i = 0; i < len; ++i) store(out + (c + i) * out_stride, buf[i]);
    }
  }
}

template <class U>
void fill_bits(U* out, int64_t stride, U bits, int64_t n) {
  if (stride == 1) {
    std::fill_n(out, n, bits);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i * stride] = bits;
}

// v rounded to float with round-to-odd, so that a further round-to-nearest to bf16 or f16 (both
// with at least two fewer mantissa bits) equals rounding v directly (no double rounding).
float round_to_odd_f32(double v) {
  float f = float(v);
  if (double(f) == v || v != v) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::fabs(double(f)) > std::fabs(v)) bits -= 1;  // the neighbour towards zero
  return std::bit_cast<float>(bits | 1u);
}

// The bit pattern of `value` rounded to an integer dtype, with a range check.
template <class I>
uint64_t integer_bits(double value, DType dtype, double lo, double hi_exclusive) {
  double r = std::nearbyint(value);
  H2_CHECK(r >= lo && r < hi_exclusive, "fill: value {} does not fit dtype {}", value,
           dtype_name(dtype));
  return std::bit_cast<std::make_unsigned_t<I>>(static_cast<I>(r));
}

// `value` rounded to dtype, as the raw bits of one element.
uint64_t element_bits(double value, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return std::bit_cast<uint32_t>(float(value));
    case DType::bf16:
      return f32_to_bf16(round_to_odd_f32(value));
    case DType::f16:
      return f32_to_f16(round_to_odd_f32(value));
    case DType::i32:
      return integer_bits<int32_t>(value, dtype, -0x1p31, 0x1p31);
    case DType::i64:
      return integer_bits<int64_t>(value, dtype, -0x1p63, 0x1p63);
    case DType::u8:
      return integer_bits<uint8_t>(value, dtype, 0, 256);
    default:
      H2_THROW(UnsupportedError, "cpu fill: dtype {} is not f32, bf16, f16, i32, i64 or u8",
               dtype_name(dtype));
  }
}

// Calls fn(U{}) with U the unsigned integer as wide as one element of dtype.
template <class Fn>
void visit_element_bits(DType dtype, const char* op, Fn&& fn) {
  switch (dtype_bits(dtype)) {
    case 8:
      fn(uint8_t{});
      break;
    case 16:
      fn(uint16_t{});
      break;
    case 32:
      fn(uint32_t{});
      break;
    case 64:
      fn(uint64_t{});
      break;
    default:
      H2_THROW(UnsupportedError, "cpu {}: dtype {} is not whole bytes", op, dtype_name(dtype));
  }
}

}  // namespace

// in: (S...) any strides, out: (S...) any strides -> out = in, converted to out's dtype.
void copy(const CopyArgs& args, Stream&) {
  const Tensor &out = args.out, &in = args.in;
  H2_CHECK(out.shape() == in.shape(), "copy: out {} {} but in {} {}", dtype_name(out.dtype()),
           out.shape().str(), dtype_name(in.dtype()), in.shape().str());
  const DType od = out.dtype(), id = in.dtype();
  if (od != id) {
    check_float(out, "copy", "out");
    check_float(in, "copy", "in");
  }
  if (out.numel() == 0) return;
  char* out_base = static_cast<char*>(out.data());
  const char* in_base = static_cast<const char*>(in.data());
  if (od == id && out_base == in_base && out.strides() == in.strides()) return;  // same view
  H2_CHECK(!out.may_alias(in), "copy: out {} and in {} overlap in memory; copy through a temporary",
           out.str(), in.str());
  Walk w = make_walk(out.shape(), out.strides(), in.strides());
  const int last = w.rank - 1;
  const int64_t so = w.stride[0][last], si = w.stride[1][last];
  if (od == id) {
    if (dtype_bits(od) == 8 && copy_transposed_bytes(w, reinterpret_cast<uint8_t*>(out_base),
                                                     reinterpret_cast<const uint8_t*>(in_base)))
      return;
    visit_element_bits(od, "copy", [&](auto u) {
      using U = decltype(u);
      for_each_run(w, [&](int64_t o, int64_t i, int64_t n) {
        copy_bits(reinterpret_cast<U*>(out_base) + o, so, reinterpret_cast<const U*>(in_base) + i,
                  si, n);
      });
    });
    return;
  }
  visit_float_dtype(od, "copy", [&](auto o_tag) {
    visit_float_dtype(id, "copy", [&](auto i_tag) {
      using O = decltype(o_tag);
      using I = decltype(i_tag);
      for_each_run(w, [&](int64_t o, int64_t i, int64_t n) {
        copy_convert(reinterpret_cast<O*>(out_base) + o, so,
                     reinterpret_cast<const I*>(in_base) + i, si, n);
      });
    });
  });
}

// out: (S...) any strides -> every element = value rounded to out's dtype (integers: to nearest).
void fill(const FillArgs& args, Stream&) {
  const Tensor& out = args.out;
  uint64_t bits = element_bits(args.value, out.dtype());
  if (out.numel() == 0) return;
  char* base = static_cast<char*>(out.data());
  Walk w = make_walk(out.shape(), out.strides(), out.strides());
  const int64_t stride = w.stride[0][w.rank - 1];
  visit_element_bits(out.dtype(), "fill", [&](auto u) {
    using U = decltype(u);
    for_each_run(w, [&](int64_t o, int64_t, int64_t n) {
      fill_bits(reinterpret_cast<U*>(base) + o, stride, U(bits), n);
    });
  });
}

}  // namespace h2::cpu
