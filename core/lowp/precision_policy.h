// Precision policy: which low-precision recipe (recipe.h) each block linear layer of a model runs
// at a given step, after the FP4 pretraining recipe. Resolution for module M of block l at step s:
//   1. `recipe` (default for every block linear; "compute" = the model's compute dtype);
//   2. `rules` in order, later rules winning: "pattern=recipe" where a pattern is one or more
//      comma-separated globs ('*' matches within one dotted segment) matched against M or a
//      dotted prefix of it (so "layers.*.mlp" covers layers.3.mlp.down_proj);
//   3. the first `keep_first` and last `keep_last` blocks: `keep_recipe`;
//   4. from step ceil(target_after * total_steps) on, modules matching `target_modules`:
//      `target_recipe` (the higher "target" precision for the end of training).
// Module names are parameter names without "model." and ".weight": layers.3.self_attn.q_proj.
// The embedding, the LM head and the norms always run in the compute dtype.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/lowp/recipe.h"

namespace h2::lowp {

struct LowPrecisionOptions {
  int delayed_history = 1024;  // fp8_delayed: amax history length
  int delayed_margin = 0;      // fp8_delayed: scale = max_finite / (amax * 2^margin)
  uint64_t seed = 0;           // stochastic rounding of gradients
};

struct PrecisionRule {
  std::string pattern;  // "layers.*.mlp" or "layers.0.mlp, layers.1.mlp"
  std::string recipe;
};

struct PrecisionPolicy {
  std::string recipe = "compute";
  std::vector<PrecisionRule> rules;
  int64_t keep_first = 0;
  int64_t keep_last = 0;
  std::string keep_recipe = "compute";
  double target_after = 1;  // fraction of the steps; 1: never switch
  std::string target_recipe = "compute";
  std::string target_modules = "*";
  MxScaleRule mx_rule = MxScaleRule::floor;
  LowPrecisionOptions options;

  // The recipe name for module `module` in block `layer` of `n_layers` at 0-based `step`.
  std::string recipe_for(std::string_view module, int64_t layer, int64_t n_layers, int64_t step,
                         int64_t total_steps) const;
  // True when any setting can quantize something.
  bool any_low_precision() const;
};

// Parses "pattern=recipe; pattern=recipe" (key names the config key for errors); throws
// ConfigError naming the piece that does not parse.
std::vector<PrecisionRule> parse_precision_rules(std::string_view text, std::string_view key);
// Whether `module` matches a comma-separated glob list (see the header comment).
bool module_matches(std::string_view patterns, std::string_view module);
// Checks a recipe name: "compute", the compute dtype's own name (f32 or bf16), or a lowp recipe;
// throws ConfigError naming `key` and the value otherwise.
void check_recipe_name(std::string_view name, std::string_view compute_dtype, std::string_view key);
// Every name check_recipe_name would accept in some configuration (for help texts).
std::string recipe_name_list();

// True for "compute", "f32" and "bf16": GEMMs in the compute dtype, nothing quantized.
bool is_compute_recipe(std::string_view name);

}  // namespace h2::lowp
