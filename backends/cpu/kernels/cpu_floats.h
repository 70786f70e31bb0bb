// FP32 views of f32/bf16/f16 tensor data. Kernels compute on float arrays of at most kChunk
// elements: f32 data is used in place, bf16 and f16 are converted into a caller's stack buffer
// (exact widening; narrowing rounds to nearest even, as core/half_float.h). Conversions are bulk
// loops the compiler vectorises (bf16 widening), AVX-512 and AVX2 (bf16 narrowing,
// bf16_narrow.h) or F16C instructions (f16), bit-identical to the scalars except that F16C widens
// signalling NaNs to quiet ones (tests/backends/cpu_floats_test.cpp).
#pragma once

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/bf16_narrow.h"
#include "backends/cpu/kernels/element.h"
#include "core/cpu_features.h"
#include "core/tensor.h"

namespace h2::cpu {

// Elements per stack buffer: 4 KiB of floats, several of which fit in L1 at once.
inline constexpr int64_t kChunk = 1024;

inline void to_floats(const float* src, int64_t n, float* dst) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
inline void to_floats(const bf16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load(src + i);
}
inline void to_floats(const f16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = load(src + i);
}

inline void from_floats(const float* src, int64_t n, float* dst) {
  if (src != dst) std::memmove(dst, src, size_t(n) * sizeof(float));
}
inline void from_floats(const float* src, int64_t n, bf16_t* dst) {
  // Whole 512-bit vectors, then (the tail, or all without AVX-512) 256-bit ones, then scalars.
  int64_t done = n >= 16 && cpu_has_avx512bw() ? from_floats_avx512(src, n, dst) : 0;
  if (n - done >= 8 && cpu_has_avx2()) done += from_floats_avx2(src + done, n - done, dst + done);
  for (int64_t i = done; i < n; ++i) store(dst + i, src[i]);
}
inline void from_floats(const float* src, int64_t n, f16_t* dst) {
  int64_t i = 0;
#if defined(__F16C__)
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound));
#endif
  for (; i < n; ++i) store(dst + i, src[i]);
}

// Throws UnsupportedError unless `t` is stored as f32, bf16 or f16.
inline void check_float(const Tensor& t, const char* op, const char* name) {
  DType d = t.dtype();
  if (d != DType::f32 && d != DType::bf16 && d != DType::f16)
    H2_THROW(UnsupportedError, "cpu {}: {} has dtype {}, not f32, bf16 or f16", op, name,
             dtype_name(d));
}

// Throws unless `t` is stored as f32 (saved statistics, optimizer state).
inline void check_f32(const Tensor& t, const char* op, const char* name) {
  H2_CHECK(t.dtype() == DType::f32, "{}: {} {} must be f32, got {}", op, name, t.shape().str(),
           dtype_name(t.dtype()));
}

// Throws unless `t` is defined and has the shape of `ref`; the message names both.
inline void check_same_shape(const char* op, const Tensor& t, const char* name, const Tensor& ref,
                             const char* ref_name) {
  H2_CHECK(t.defined(), "{}: {} is undefined", op, name);
  H2_CHECK(t.shape() == ref.shape(), "{}: {} {} but {} {}", op, name, t.shape().str(), ref_name,
           ref.shape().str());
}

// Reads a contiguous float tensor (any of the three storage dtypes) as float.
class FloatIn {
 public:
  FloatIn() = default;  // for an optional argument that is undefined: never read
  FloatIn(const Tensor& t, const char* op, const char* name) : data_(t.data()), dtype_(t.dtype()) {
    check_float(t, op, name);
  }
  // Elements [begin, begin + n), n <= kChunk: in place for f32, else converted into buf.
  const float* read(int64_t begin, int64_t n, float* buf) const {
    switch (dtype_) {
      case DType::bf16:
        to_floats(static_cast<const bf16_t*>(data_) + begin, n, buf);
        return buf;
      case DType::f16:
        to_floats(static_cast<const f16_t*>(data_) + begin, n, buf);
        return buf;
      default:
        return static_cast<const float*>(data_) + begin;
    }
  }
  float at(int64_t i) const {
    switch (dtype_) {
      case DType::bf16:
        return load(static_cast<const bf16_t*>(data_) + i);
      case DType::f16:
        return load(static_cast<const f16_t*>(data_) + i);
      default:
        return static_cast<const float*>(data_)[i];
    }
  }

 private:
  const void* data_ = nullptr;
  DType dtype_ = DType::f32;
};

// Writes a contiguous float tensor from float: the kernel computes a chunk into target() and
// then commit()s it (a no-op for f32, whose target is the tensor itself).
class FloatOut {
 public:
  FloatOut(const Tensor& t, const char* op, const char* name) : data_(t.data()), dtype_(t.dtype()) {
    check_float(t, op, name);
  }
  float* target(int64_t begin, float* buf) const {
    return dtype_ == DType::f32 ? static_cast<float*>(data_) + begin : buf;
  }
  void commit(int64_t begin, int64_t n, const float* values) const {
    switch (dtype_) {
      case DType::bf16:
        from_floats(values, n, static_cast<bf16_t*>(data_) + begin);
        break;
      case DType::f16:
        from_floats(values, n, static_cast<f16_t*>(data_) + begin);
        break;
      default:
        from_floats(values, n, static_cast<float*>(data_) + begin);
        break;
    }
  }

 private:
  void* data_;
  DType dtype_;
};

}  // namespace h2::cpu
