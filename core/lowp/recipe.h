// Low-precision recipes for linear layers: which format, block shape and scale rule each GEMM
// operand gets. A linear layer y = x W^T runs three GEMMs, each consuming K-contiguous operands
// (core/lowp/quant_spec.h):
//   forward  y  (N, O) = x  (N, I)  . W   (O, I)^T     K = I
//   dgrad    dx (N, I) = dy (N, O)  . W^T (I, O)^T     K = O
//   wgrad    dW (O, I) = dy^T (O, N) . x^T (I, N)^T    K = N (tokens)
// `input` quantizes x (both layouts), `weight` W (both layouts), `grad` dy (both layouts).
// Recipes (docs/numerics.md):
//   fp8_current    per-tensor FP32 scale from this step's amax; E4M3 x and W, E5M2 dy
//   fp8_delayed    as fp8_current, the scale from an amax history (DelayedScaling)
//   fp8_blockwise  DeepSeek-V3: E4M3 everywhere; x and dy in 1 x 128 tiles, W in 128 x 128 blocks
//   mxfp8          OCP MX: E4M3 in 1 x 32 blocks with E8M0 scales
//   mxfp4          OCP MX: E2M1 in 1 x 32 blocks with E8M0 scales; dy stochastically rounded
//   nvfp4          E2M1 in 1 x 16 blocks, E4M3 block scales and an FP32 tensor scale; dy
//                  stochastically rounded
// The MX recipes take the OCP floor scale rule by default; MxScaleRule::ceil selects round-up.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/lowp/quant_spec.h"

namespace h2::lowp {

enum class Scaling : uint8_t { block, current, delayed };
enum class MxScaleRule : uint8_t { floor, ceil };

// A block linear's GEMM precision: the model's compute dtype, or one of the recipes above, in
// the order of the table. Parsed from configs once (precision_policy.h); names as written there.
enum class Precision : uint8_t {
  compute,
  fp8_current,
  fp8_delayed,
  fp8_blockwise,
  mxfp8,
  mxfp4,
  nvfp4
};
std::string_view precision_name(Precision precision);
// "compute" or a recipe name; nullopt otherwise.
std::optional<Precision> parse_precision(std::string_view name);

struct Recipe {
  std::string_view name;
  Precision precision = Precision::compute;
  QuantSpec input;
  QuantSpec weight;
  QuantSpec grad;
  Scaling scaling = Scaling::block;  // current/delayed: per-tensor specs only
  bool grad_stochastic = false;
};

// The recipe of `precision` (with MX specs using `mx_rule`); Error for Precision::compute.
Recipe find_recipe(Precision precision, MxScaleRule mx_rule = MxScaleRule::floor);
// The recipe called `name`; throws ConfigError listing the names otherwise.
Recipe find_recipe(std::string_view name, MxScaleRule mx_rule = MxScaleRule::floor);
// Every recipe name, in the order of the table above.
std::span<const std::string_view> recipe_names();
// Parses "floor" / "ceil"; throws ConfigError naming the text otherwise.
MxScaleRule parse_mx_scale_rule(std::string_view text);

}  // namespace h2::lowp
