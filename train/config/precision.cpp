// The precision section: its cross-field checks and the PrecisionPolicy it describes.
#include <fmt/format.h>
#include "core/error.h"
#include "train/config/config.h"

namespace h2::config {
namespace {

std::string at(const TrainConfig& c, std::string_view key) {
  return fmt::format("{} ({})", key, c.origin_of(key));
}

}  // namespace

void check_precision(const TrainConfig& c) {
  const PrecisionConfig& p = c.precision;
  const std::string_view dtype = dtype_name(c.train.dtype);
  lowp::check_recipe_name(p.recipe, dtype, at(c, "precision.recipe"));
  lowp::check_recipe_name(p.keep_recipe, dtype, at(c, "precision.keep_recipe"));
  lowp::check_recipe_name(p.target_recipe, dtype, at(c, "precision.target_recipe"));
  for (const lowp::PrecisionRule& rule :
       lowp::parse_precision_rules(p.modules, at(c, "precision.modules")))
    lowp::check_recipe_name(rule.recipe, dtype,
                            fmt::format("{} rule '{}'", at(c, "precision.modules"), rule.pattern));
}

lowp::PrecisionPolicy precision_policy(const TrainConfig& c) {
  const PrecisionConfig& p = c.precision;
  return {.recipe = p.recipe,
          .rules = lowp::parse_precision_rules(p.modules, "precision.modules"),
          .keep_first = p.keep_first,
          .keep_last = p.keep_last,
          .keep_recipe = p.keep_recipe,
          .target_after = p.target_after,
          .target_recipe = p.target_recipe,
          .target_modules = p.target_modules,
          .mx_rule = lowp::parse_mx_scale_rule(p.mx_scale),
          .options = {.delayed_history = int(p.delayed_history),
                      .delayed_margin = int(p.delayed_margin),
                      .seed = uint64_t(c.train.seed)}};
}

}  // namespace h2::config
