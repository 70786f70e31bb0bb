// Precision policy resolution and its small text grammar (see precision_policy.h).
#include "core/lowp/precision_policy.h"

#include <cmath>

#include <fmt/format.h>
#include "core/error.h"

namespace h2::lowp {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

// '*' matches any run of characters other than '.'.
bool glob_matches(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) return text.empty();
  if (pattern.front() == '*') {
    for (size_t n = 0;; ++n) {
      if (glob_matches(pattern.substr(1), text.substr(n))) return true;
      if (n == text.size() || text[n] == '.') return false;
    }
  }
  return !text.empty() && pattern.front() == text.front() &&
         glob_matches(pattern.substr(1), text.substr(1));
}

// The module itself or one of its dotted prefixes matches.
bool glob_matches_prefix(std::string_view pattern, std::string_view module) {
  for (size_t end = 0; end != std::string_view::npos; end = module.find('.', end + 1)) {
    if (end > 0 && glob_matches(pattern, module.substr(0, end))) return true;
  }
  return glob_matches(pattern, module);
}

}  // namespace

bool module_matches(std::string_view patterns, std::string_view module) {
  while (!patterns.empty()) {
    size_t comma = patterns.find(',');
    std::string_view one = trim(patterns.substr(0, comma));
    if (!one.empty() && glob_matches_prefix(one, module)) return true;
    if (comma == std::string_view::npos) break;
    patterns.remove_prefix(comma + 1);
  }
  return false;
}

std::vector<PrecisionRule> parse_precision_rules(std::string_view text, std::string_view key,
                                                 std::string_view compute_dtype) {
  std::vector<PrecisionRule> rules;
  while (!trim(text).empty()) {
    size_t semicolon = text.find(';');
    std::string_view piece = trim(text.substr(0, semicolon));
    if (!piece.empty()) {
      size_t eq = piece.rfind('=');
      if (eq == std::string_view::npos)
        H2_THROW(ConfigError,
                 "{}: '{}' is not 'pattern=recipe' (rules are separated by ';', e.g. "
                 "\"layers.*.mlp=nvfp4; layers.*.self_attn=fp8_blockwise\")",
                 key, piece);
      std::string_view pattern = trim(piece.substr(0, eq)), recipe = trim(piece.substr(eq + 1));
      if (pattern.empty() || recipe.empty())
        H2_THROW(ConfigError, "{}: '{}' needs both a module pattern and a recipe", key, piece);
      rules.push_back(
          {std::string(pattern),
           parse_gemm_precision(recipe, compute_dtype, fmt::format("{} rule '{}'", key, pattern))});
    }
    if (semicolon == std::string_view::npos) break;
    text.remove_prefix(semicolon + 1);
  }
  return rules;
}

Precision parse_gemm_precision(std::string_view name, std::string_view compute_dtype,
                               std::string_view key) {
  if (name == compute_dtype) return Precision::compute;
  if (name == "f32" || name == "bf16")
    H2_THROW(ConfigError,
             "{}: '{}' differs from train.dtype {}; GEMMs outside a low-precision recipe run in "
             "the compute dtype (write 'compute', or change train.dtype)",
             key, name, compute_dtype);
  if (const std::optional<Precision> precision = parse_precision(name)) return *precision;
  H2_THROW(ConfigError, "{}: unknown precision '{}'; use {}", key, name, recipe_name_list());
}

std::string recipe_name_list() {
  std::string out = "compute (or the train.dtype name)";
  for (std::string_view n : recipe_names()) out += fmt::format(", {}", n);
  return out;
}

Precision PrecisionPolicy::recipe_for(std::string_view module, int64_t layer, int64_t n_layers,
                                      int64_t step, int64_t total_steps) const {
  Precision chosen = recipe;
  for (const PrecisionRule& r : rules)
    if (module_matches(r.pattern, module)) chosen = r.recipe;
  if (layer < keep_first || layer >= n_layers - keep_last) chosen = keep_recipe;
  const auto switch_step = int64_t(std::ceil(target_after * double(total_steps)));
  if (target_after < 1 && step >= switch_step && module_matches(target_modules, module))
    chosen = target_recipe;
  return chosen;
}

bool PrecisionPolicy::any_low_precision() const {
  const auto low = [](Precision p) { return p != Precision::compute; };
  if (low(recipe) || low(keep_recipe) || low(target_recipe)) return true;
  for (const PrecisionRule& r : rules)
    if (low(r.recipe)) return true;
  return false;
}

}  // namespace h2::lowp
