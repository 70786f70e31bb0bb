// Accuracy expected of a kernel whose inputs and outputs are stored in `dtype` and whose
// arithmetic is FP32: |got - ref| <= atol + rtol * |ref| elementwise. Shared by the conformance
// suite and by autocompare (H2_CHECK_OPS), so both judge kernels by the same table.
#pragma once

#include <span>
#include <string>

#include "core/dtype.h"

namespace h2 {

struct Tolerance {
  double atol;
  double rtol;
};

Tolerance default_tolerance(DType dtype);

struct Comparison {
  bool ok = true;
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;  // flat index
  double max_abs_error = 0;
  double normalized_mse = 0;  // sum((got-ref)^2) / max(sum(ref^2), tiny)
  std::string str() const;
};

// Compares flat arrays of equal length; NaN matches NaN, anything else against NaN mismatches.
Comparison compare(std::span<const float> got, std::span<const double> ref, Tolerance tol);
Comparison compare(std::span<const float> got, std::span<const float> ref, Tolerance tol);

}  // namespace h2
