// The recipe table (see recipe.h).
#include "core/lowp/recipe.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include "core/error.h"

namespace h2::lowp {
namespace {

constexpr std::array<std::string_view, 6> kNames = {"fp8_current", "fp8_delayed", "fp8_blockwise",
                                                    "mxfp8",       "mxfp4",       "nvfp4"};

QuantSpec per_tensor(Format f) {
  return {.element = f, .rule = ScaleRule::f32_amax, .block_rows = 0, .block_cols = 0};
}

QuantSpec blocks(Format f, ScaleRule rule, int64_t rows, int64_t cols) {
  return {.element = f, .rule = rule, .block_rows = rows, .block_cols = cols};
}

}  // namespace

std::string_view precision_name(Precision precision) {
  return precision == Precision::compute ? "compute" : kNames[size_t(precision) - 1];
}

std::optional<Precision> parse_precision(std::string_view name) {
  if (name == "compute") return Precision::compute;
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return Precision(i + 1);
  return std::nullopt;
}

Recipe find_recipe(Precision precision, MxScaleRule mx_rule) {
  const ScaleRule mx = mx_rule == MxScaleRule::floor ? ScaleRule::e8m0_floor : ScaleRule::e8m0_ceil;
  const std::string_view name = precision_name(precision);
  switch (precision) {
    case Precision::compute:
      break;
    case Precision::fp8_current:
    case Precision::fp8_delayed:
      return {.name = name,
              .precision = precision,
              .input = per_tensor(Format::e4m3),
              .weight = per_tensor(Format::e4m3),
              .grad = per_tensor(Format::e5m2),
              .scaling = precision == Precision::fp8_current ? Scaling::current : Scaling::delayed};
    case Precision::fp8_blockwise:
      return {.name = name,
              .precision = precision,
              .input = blocks(Format::e4m3, ScaleRule::f32_amax, 1, 128),
              .weight = blocks(Format::e4m3, ScaleRule::f32_amax, 128, 128),
              .grad = blocks(Format::e4m3, ScaleRule::f32_amax, 1, 128)};
    case Precision::mxfp8: {
      const QuantSpec s = blocks(Format::e4m3, mx, 1, 32);
      return {.name = name, .precision = precision, .input = s, .weight = s, .grad = s};
    }
    case Precision::mxfp4: {
      const QuantSpec s = blocks(Format::e2m1, mx, 1, 32);
      return {.name = name,
              .precision = precision,
              .input = s,
              .weight = s,
              .grad = s,
              .grad_stochastic = true};
    }
    case Precision::nvfp4: {
      const QuantSpec s = blocks(Format::e2m1, ScaleRule::nvfp4, 1, 16);
      return {.name = name,
              .precision = precision,
              .input = s,
              .weight = s,
              .grad = s,
              .grad_stochastic = true};
    }
  }
  H2_THROW(Error, "find_recipe: the compute precision has no low-precision recipe");
}

Recipe find_recipe(std::string_view name, MxScaleRule mx_rule) {
  const std::optional<Precision> precision = parse_precision(name);
  if (!precision || *precision == Precision::compute)
    H2_THROW(ConfigError, "unknown low-precision recipe '{}'; known: {}", name,
             fmt::join(kNames, ", "));
  return find_recipe(*precision, mx_rule);
}

std::span<const std::string_view> recipe_names() {
  return kNames;
}

MxScaleRule parse_mx_scale_rule(std::string_view text) {
  if (text == "floor") return MxScaleRule::floor;
  if (text == "ceil") return MxScaleRule::ceil;
  H2_THROW(ConfigError, "unknown MX scale rule '{}'; use floor (OCP) or ceil (round-up)", text);
}

}  // namespace h2::lowp
