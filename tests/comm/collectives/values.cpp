// Typed element access for the collective tests (independent of the code under test).
#include "values.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half_float.h"

namespace h2::comm::testing {
namespace {

void store(void* base, int64_t i, DType dtype, double v) {
  switch (dtype) {
    case DType::f32:
      static_cast<float*>(base)[i] = float(v);
      return;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(float(v));
      return;
    case DType::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(float(v));
      return;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = int32_t(v);
      return;
    case DType::i64:
      static_cast<int64_t*>(base)[i] = int64_t(v);
      return;
    case DType::u8:
      static_cast<uint8_t*>(base)[i] = uint8_t(v);
      return;
    default:
      H2_THROW(Error, "no test values for {}", dtype_name(dtype));
  }
}

double load(const void* base, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(base)[i];
    case DType::i64:
      return double(static_cast<const int64_t*>(base)[i]);
    case DType::u8:
      return static_cast<const uint8_t*>(base)[i];
    default:
      H2_THROW(Error, "no test values for {}", dtype_name(dtype));
  }
}

}  // namespace

Tensor make_tensor(const std::vector<double>& values, DType dtype, Device& cpu) {
  Tensor t = Tensor::empty(Shape{int64_t(values.size())}, dtype, cpu);
  for (size_t i = 0; i < values.size(); ++i) store(t.data(), int64_t(i), dtype, values[i]);
  return t;
}

std::vector<double> read_tensor(const Tensor& tensor) {
  const Tensor c = tensor.contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i) out[size_t(i)] = load(c.data(), i, c.dtype());
  return out;
}

void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what,
                   double rtol) {
  const std::vector<double> values = read_tensor(got);
  H2_CHECK(values.size() == want.size(), "{}: {} elements, expected {}", what, values.size(),
           want.size());
  for (size_t i = 0; i < values.size(); ++i)
    if (std::abs(values[i] - want[i]) > rtol * std::abs(want[i]))
      H2_THROW(Error, "{}: element {} is {}, expected {}", what, i, values[i], want[i]);
}

}  // namespace h2::comm::testing
