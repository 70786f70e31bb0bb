// Argument checks shared by every backend's quantize and qmatmul kernels (implemented in
// quant_spec.cpp, so .cu files can call them without compiling fmt): a QuantSpec that a kernel
// can run, and a QTensor whose codes, scales and global agree with its spec. Each throws
// h2::Error naming the op, the argument and the spec (describe()).
#pragma once

#include <cstdint>

#include "core/lowp/quant_spec.h"

namespace h2::lowp {

// Whether the scale grid of an (R, K) matrix is one block (a per-tensor spec).
bool is_per_tensor(const QuantSpec& spec, int64_t rows, int64_t cols);

// The spec of an (R, K) matrix: element e4m3, e5m2 or e2m1; block extents >= 0; nvfp4 only with
// e2m1; e2m1 needs an even K and even block_cols (packed rows and blocks start on whole bytes).
void check_spec(const QuantSpec& spec, int64_t rows, int64_t cols, const char* op,
                const char* name);

// q.codes (R, K) in element_dtype, q.scales scale_shape() in scale_dtype, q.global one f32 element
// for nvfp4 and undefined otherwise; all contiguous. Also runs check_spec.
void check_qtensor(const QTensor& q, const char* op, const char* name);

}  // namespace h2::lowp
