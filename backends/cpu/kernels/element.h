// Loads and stores of one element in FP32 for each floating storage type, and a switch that
// instantiates a kernel body for the storage type of a tensor. Kernels are written once as
// templates over the storage type `T` and compute in float.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half_float.h"

namespace h2::cpu {

inline float load(const float* p) {
  return *p;
}
inline float load(const bf16_t* p) {
  return bf16_to_f32(p->bits);
}
inline float load(const f16_t* p) {
  return f16_to_f32(p->bits);
}
inline void store(float* p, float v) {
  *p = v;
}
inline void store(bf16_t* p, float v) {
  p->bits = f32_to_bf16(v);
}
inline void store(f16_t* p, float v) {
  p->bits = f32_to_f16(v);
}

// Calls fn(T{}) with T the storage type of `dtype` (float, bf16_t or f16_t).
template <class Fn>
decltype(auto) visit_float_dtype(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn(float{});
    case DType::bf16:
      return fn(bf16_t{});
    case DType::f16:
      return fn(f16_t{});
    default:
      H2_THROW(UnsupportedError, "cpu {}: dtype {} is not f32, bf16 or f16", op, dtype_name(dtype));
  }
}

// Reads integer ids of an i32 or i64 tensor.
inline int64_t load_index(const void* base, DType dtype, int64_t i) {
  return dtype == DType::i32 ? static_cast<const int32_t*>(base)[i]
                             : static_cast<const int64_t*>(base)[i];
}

}  // namespace h2::cpu
