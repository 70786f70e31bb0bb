// QuantSpec helpers, QTensor allocation and the argument checks of quant_check.h.
#include "core/lowp/quant_spec.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/lowp/quant_check.h"

namespace h2::lowp {
namespace {

std::string_view rule_name(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::f32_amax:
      return "f32_amax";
    case ScaleRule::e8m0_floor:
      return "e8m0_floor";
    case ScaleRule::e8m0_ceil:
      return "e8m0_ceil";
    case ScaleRule::nvfp4:
      return "nvfp4";
  }
  return "?";
}

int64_t blocks_along(int64_t spec_block, int64_t n) {
  if (n == 0) return 0;
  const int64_t b = block_extent(spec_block, n);
  return (n + b - 1) / b;
}

}  // namespace

DType element_dtype(Format f) {
  switch (f) {
    case Format::e4m3:
      return DType::f8e4m3;
    case Format::e5m2:
      return DType::f8e5m2;
    case Format::e2m1:
      return DType::f4e2m1;
    case Format::e8m0:
      break;
  }
  H2_THROW(Error, "{} is a scale format, not an element format", format_info(f).name);
}

std::optional<Format> element_format(DType t) {
  switch (t) {
    case DType::f8e4m3:
      return Format::e4m3;
    case DType::f8e5m2:
      return Format::e5m2;
    case DType::f4e2m1:
      return Format::e2m1;
    default:
      return std::nullopt;
  }
}

DType scale_dtype(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::f32_amax:
      return DType::f32;
    case ScaleRule::e8m0_floor:
    case ScaleRule::e8m0_ceil:
      return DType::u8;
    case ScaleRule::nvfp4:
      return DType::f8e4m3;
  }
  H2_THROW(Error, "unknown scale rule {}", int(rule));
}

Shape scale_shape(const QuantSpec& spec, int64_t rows, int64_t cols) {
  H2_CHECK(spec.block_rows >= 0 && spec.block_cols >= 0, "negative block extent in {}",
           describe(spec));
  return Shape{blocks_along(spec.block_rows, rows), blocks_along(spec.block_cols, cols)};
}

std::string describe(const QuantSpec& spec) {
  if (spec.block_rows == 0 && spec.block_cols == 0)
    return fmt::format("{} {} per-tensor", format_info(spec.element).name, rule_name(spec.rule));
  auto extent = [](int64_t b, const char* whole) {
    return b == 0 ? std::string(whole) : std::to_string(b);
  };
  return fmt::format("{} {} {}x{}", format_info(spec.element).name, rule_name(spec.rule),
                     extent(spec.block_rows, "R"), extent(spec.block_cols, "K"));
}

QTensor QTensor::empty(const QuantSpec& spec, int64_t rows, int64_t cols, Device& device) {
  check_spec(spec, rows, cols, "QTensor::empty", "spec");
  QTensor q;
  q.spec = spec;
  q.codes = Tensor::empty({rows, cols}, element_dtype(spec.element), device);
  q.scales = Tensor::empty(scale_shape(spec, rows, cols), scale_dtype(spec.rule), device);
  if (spec.rule == ScaleRule::nvfp4) q.global = Tensor::empty({1}, DType::f32, device);
  return q;
}

bool is_per_tensor(const QuantSpec& spec, int64_t rows, int64_t cols) {
  const Shape grid = scale_shape(spec, rows, cols);
  return grid[0] <= 1 && grid[1] <= 1;
}

void check_spec(const QuantSpec& spec, int64_t rows, int64_t cols, const char* op,
                const char* name) {
  H2_CHECK(spec.element != Format::e8m0,
           "{}: {} ({}): e8m0 is a scale format, not an element format", op, name, describe(spec));
  H2_CHECK(spec.block_rows >= 0 && spec.block_cols >= 0, "{}: {} ({}): negative block extent", op,
           name, describe(spec));
  H2_CHECK(spec.rule != ScaleRule::nvfp4 || spec.element == Format::e2m1,
           "{}: {} ({}): the nvfp4 rule needs e2m1 elements", op, name, describe(spec));
  if (spec.element == Format::e2m1) {
    const int64_t bc = block_extent(spec.block_cols, cols);
    H2_CHECK(cols % 2 == 0 && (bc % 2 == 0 || bc >= cols),
             "{}: {} ({}) of ({}, {}): e2m1 needs an even K and even block_cols, so that packed "
             "rows and blocks start on whole bytes",
             op, name, describe(spec), rows, cols);
  }
}

void check_qtensor(const QTensor& q, const char* op, const char* name) {
  const std::string spec = describe(q.spec);
  H2_CHECK(q.codes.defined() && q.codes.rank() == 2,
           "{}: {}.codes ({}) must be a defined (R, K) matrix", op, name, spec);
  const int64_t rows = q.rows(), cols = q.cols();
  check_spec(q.spec, rows, cols, op, name);
  const DType element = element_dtype(q.spec.element);
  H2_CHECK(q.codes.dtype() == element, "{}: {}.codes is {} but {} stores {}", op, name,
           dtype_name(q.codes.dtype()), spec, dtype_name(element));
  const Shape grid = scale_shape(q.spec, rows, cols);
  H2_CHECK(q.scales.defined() && q.scales.shape() == grid,
           "{}: {}.scales is {} but {} of ({}, {}) needs {}", op, name,
           q.scales.defined() ? q.scales.shape().str() : "undefined", spec, rows, cols, grid.str());
  const DType sdt = scale_dtype(q.spec.rule);
  H2_CHECK(q.scales.dtype() == sdt, "{}: {}.scales is {} but {} needs {}", op, name,
           dtype_name(q.scales.dtype()), spec, dtype_name(sdt));
  if (q.spec.rule == ScaleRule::nvfp4) {
    H2_CHECK(q.global.defined() && q.global.numel() == 1 && q.global.dtype() == DType::f32,
             "{}: {}.global must be one f32 element for {}", op, name, spec);
  } else {
    H2_CHECK(!q.global.defined(), "{}: {}.global is only used by nvfp4, not {}", op, name, spec);
  }
  H2_CHECK(q.codes.is_contiguous() && q.scales.is_contiguous(),
           "{}: {} ({}): codes and scales must be contiguous", op, name, spec);
}

}  // namespace h2::lowp
