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
  Precision recipe = Precision::compute;
};

struct PrecisionPolicy {
  Precision recipe = Precision::compute;
  std::vector<PrecisionRule> rules;
  int64_t keep_first = 0;
  int64_t keep_last = 0;
  Precision keep_recipe = Precision::compute;
  double target_after = 1;  // fraction of the steps; 1: never switch
  Precision target_recipe = Precision::compute;
  std::string target_modules = "*";
  MxScaleRule mx_rule = MxScaleRule::floor;
  LowPrecisionOptions options;

  // The precision of module `module` in block `layer` of `n_layers` at 0-based `step`.
  Precision recipe_for(std::string_view module, int64_t layer, int64_t n_layers, int64_t step,
                       int64_t total_steps) const;
  // True when any setting can quantize something.
  bool any_low_precision() const;
};

// Parses "pattern=recipe; pattern=recipe" (key names the config key for errors; recipes as
// parse_gemm_precision reads them); throws ConfigError naming the piece that does not parse.
std::vector<PrecisionRule> parse_precision_rules(std::string_view text, std::string_view key,
                                                 std::string_view compute_dtype = "f32");
// Whether `module` matches a comma-separated glob list (see the header comment).
bool module_matches(std::string_view patterns, std::string_view module);
// A precision as a config writes it: "compute", the compute dtype's own name (f32 or bf16, which
// mean compute), or a recipe; throws ConfigError naming `key` and the value otherwise.
Precision parse_gemm_precision(std::string_view name, std::string_view compute_dtype,
                               std::string_view key);
// Every name check_recipe_name would accept in some configuration (for help texts).
std::string recipe_name_list();

}  // namespace h2::lowp
