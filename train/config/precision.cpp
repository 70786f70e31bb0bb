// The precision section: its cross-field checks and the PrecisionPolicy it describes.
#include <fmt/format.h>
#include "core/error.h"
#include "train/config/config.h"
#include "train/config/keys.h"

namespace h2::config {
namespace {

std::string at(const TrainConfig& c, std::string_view key) {
  return fmt::format("{} ({})", key, c.origin_of(key));
}

// A precision key's value as lowp reads it (f32 and bf16 must be train.dtype: ConfigError).
lowp::Precision precision_of(const TrainConfig& c, std::string_view key) {
  const KeyInfo* info = find_key(key);
  const std::string_view name =
      choice_name(info->choices, std::get<ChoiceField>(info->field).get(c));
  return lowp::parse_gemm_precision(name, dtype_name(c.train.dtype), at(c, key));
}

}  // namespace

void check_precision(const TrainConfig& c) {
  (void)precision_policy(c);
}

lowp::PrecisionPolicy precision_policy(const TrainConfig& c) {
  const PrecisionConfig& p = c.precision;
  return {.recipe = precision_of(c, "precision.recipe"),
          .rules = lowp::parse_precision_rules(p.modules, at(c, "precision.modules"),
                                               dtype_name(c.train.dtype)),
          .keep_first = p.keep_first,
          .keep_last = p.keep_last,
          .keep_recipe = precision_of(c, "precision.keep_recipe"),
          .target_after = p.target_after,
          .target_recipe = precision_of(c, "precision.target_recipe"),
          .target_modules = p.target_modules,
          .mx_rule = p.mx_scale,
          .options = {.delayed_history = int(p.delayed_history),
                      .delayed_margin = int(p.delayed_margin),
                      .seed = uint64_t(c.train.seed)}};
}

}  // namespace h2::config
