// The per-dtype tolerance table and the element-wise comparison (see tolerance.h).
#include "core/tolerance.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace h2 {

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return {1e-5, 1e-4};  // FP32 with reordered accumulation over ~10^4 terms
    case DType::f16:
      return {1e-3, 4e-3};  // two f16 roundings (2^-11 each) plus FP32 math
    case DType::bf16:
      return {1e-2, 2e-2};  // two bf16 roundings (2^-8 each) plus FP32 math
    case DType::f8e4m3:
      return {2e-2, 1.25e-1};
    case DType::f8e5m2:
      return {4e-2, 2.5e-1};
    case DType::f4e2m1:
      return {2.5e-1, 5e-1};
    default:
      return {0, 0};  // integers: exact
  }
}

std::string Comparison::str() const {
  if (ok)
    return fmt::format("ok (max abs error {:.3g}, nmse {:.3g})", max_abs_error, normalized_mse);
  return fmt::format("{} mismatches, first at flat index {}, max abs error {:.3g}, nmse {:.3g}",
                     mismatches, first_mismatch, max_abs_error, normalized_mse);
}

Comparison compare(std::span<const float> got, std::span<const double> ref, Tolerance tol) {
  H2_CHECK(got.size() == ref.size(), "compare {} values against {}", got.size(), ref.size());
  Comparison c;
  double err_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], r = ref[i];
    bool match;
    if (std::isnan(r) || std::isnan(g)) {
      match = std::isnan(r) && std::isnan(g);
    } else if (std::isinf(r) || std::isinf(g)) {
      match = g == r;
    } else {
      double err = std::abs(g - r);
      c.max_abs_error = std::max(c.max_abs_error, err);
      err_sq += err * err;
      ref_sq += r * r;
      match = err <= tol.atol + tol.rtol * std::abs(r);
    }
    if (!match) {
      if (c.mismatches == 0) c.first_mismatch = int64_t(i);
      ++c.mismatches;
    }
  }
  c.normalized_mse = err_sq / std::max(ref_sq, 1e-30);
  c.ok = c.mismatches == 0;
  return c;
}

Comparison compare(std::span<const float> got, std::span<const float> ref, Tolerance tol) {
  std::vector<double> wide(ref.begin(), ref.end());
  return compare(got, wide, tol);
}

}  // namespace h2
