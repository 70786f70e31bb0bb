// Host-side helpers for tests, tools and examples: build tensors from host values and read them
// back, on any device (copies go through host memory explicitly).
#pragma once

#include <span>
#include <vector>

#include "core/tensor.h"

namespace h2 {

// A contiguous tensor of `dtype` on `device` holding `values` rounded to dtype (f32, bf16, f16).
Tensor tensor_from_floats(std::span<const float> values, const Shape& shape, DType dtype,
                          Device& device);
// Integer tensor (i32 or i64) from values.
Tensor tensor_from_ints(std::span<const int64_t> values, const Shape& shape, DType dtype,
                        Device& device);
// Every element of a floating tensor (f32, bf16, f16; any strides, any device) as f32, in
// row-major order.
std::vector<float> tensor_to_floats(const Tensor& tensor);
std::vector<int64_t> tensor_to_ints(const Tensor& tensor);

}  // namespace h2
