// Host-side helpers for tests, tools and examples: build tensors from host values and read them
// back, on any device (copies go through host memory explicitly).
#pragma once

#include <span>
#include <vector>

#include "core/tensor.h"

namespace h2 {

// A contiguous tensor of `dtype` on `device` holding `values` rounded to dtype (f32, bf16, f16;
// f8e4m3, f8e5m2, f4e2m1 as unscaled codes, saturating, ties to even).
Tensor tensor_from_floats(std::span<const float> values, const Shape& shape, DType dtype,
                          Device& device);
// Integer tensor (i32 or i64) from values.
Tensor tensor_from_ints(std::span<const int64_t> values, const Shape& shape, DType dtype,
                        Device& device);
// Every element of a floating tensor (f32, bf16, f16; f8/f4 codes decoded without a scale; any
// strides, any device) as f32, in row-major order.
std::vector<float> tensor_to_floats(const Tensor& tensor);
std::vector<int64_t> tensor_to_ints(const Tensor& tensor);

// Element `i` of a host buffer of `dtype` (f32, bf16, f16, f8e4m3, f8e5m2, f4e2m1 (nibble i of the
// packed buffer), i32, i64, u8), written from or read as a double; the value is rounded (floats,
// codes saturating) or truncated (integers) to the dtype.
void store_host_element(void* base, DType dtype, int64_t i, double value);
double load_host_element(const void* base, DType dtype, int64_t i);

}  // namespace h2
