// Reduction loops: one template per storage type, vectorised by the compiler (-O3).
#include "comm/algorithms/reduce_kernels.h"

#include <algorithm>

#include "core/error.h"
#include "core/half_float.h"

namespace h2::comm {
namespace {

template <typename T>
void reduce_native(void* dst, const void* a, const void* b, int64_t n, ReduceOp op) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (int64_t i = 0; i < n; ++i) d[i] = T(x[i] + y[i]);
      return;
    case ReduceOp::max:
      for (int64_t i = 0; i < n; ++i) d[i] = std::max(x[i], y[i]);
      return;
    case ReduceOp::min:
      for (int64_t i = 0; i < n; ++i) d[i] = std::min(x[i], y[i]);
      return;
  }
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void reduce_half(void* dst, const void* a, const void* b, int64_t n, ReduceOp op) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (int64_t i = 0; i < n; ++i) d[i] = Narrow(Widen(x[i]) + Widen(y[i]));
      return;
    case ReduceOp::max:
      for (int64_t i = 0; i < n; ++i) d[i] = Widen(x[i]) >= Widen(y[i]) ? x[i] : y[i];
      return;
    case ReduceOp::min:
      for (int64_t i = 0; i < n; ++i) d[i] = Widen(x[i]) <= Widen(y[i]) ? x[i] : y[i];
      return;
  }
}

}  // namespace

bool reduce_supported(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
    case DType::bf16:
    case DType::f16:
      return true;
    case DType::i32:
    case DType::i64:
    case DType::u8:
      return op != ReduceOp::avg;
    default:
      return false;
  }
}

void reduce_elements(void* dst, const void* a, const void* b, int64_t count, DType dtype,
                     ReduceOp op) {
  H2_CHECK(reduce_supported(dtype, op), "reduction {} is not defined on {}", reduce_op_name(op),
           dtype_name(dtype));
  switch (dtype) {
    case DType::f32:
      return reduce_native<float>(dst, a, b, count, op);
    case DType::i32:
      return reduce_native<int32_t>(dst, a, b, count, op);
    case DType::i64:
      return reduce_native<int64_t>(dst, a, b, count, op);
    case DType::u8:
      return reduce_native<uint8_t>(dst, a, b, count, op);
    case DType::bf16:
      return reduce_half<bf16_to_f32, f32_to_bf16>(dst, a, b, count, op);
    case DType::f16:
      return reduce_half<f16_to_f32, f32_to_f16>(dst, a, b, count, op);
    default:
      break;
  }
}

void finish_avg(void* data, int64_t count, DType dtype, int ranks) {
  const float n = float(ranks);
  switch (dtype) {
    case DType::f32: {
      float* d = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] /= n;
      return;
    }
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] = f32_to_bf16(bf16_to_f32(d[i]) / n);
      return;
    }
    case DType::f16: {
      uint16_t* d = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) d[i] = f32_to_f16(f16_to_f32(d[i]) / n);
      return;
    }
    default:
      H2_THROW(UnsupportedError, "avg is not defined on {}", dtype_name(dtype));
  }
}

}  // namespace h2::comm
