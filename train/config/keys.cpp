// The key table (see keys.h) and the text <-> value conversions every key goes through.
#include "train/config/keys.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include "core/error.h"
#include "train/config/key_text.h"

namespace h2::config {
namespace {

// &field<&TrainConfig::model, &ModelConfig::dim> is an accessor `int64_t* (*)(TrainConfig&)`.
template <auto Section, auto Member>
auto* field(TrainConfig& c) {
  return &((c.*Section).*Member);
}

// choice<&TrainConfig::parallel, &ParallelConfig::mode>: an enum field as its choice index.
template <auto Section, auto Member>
constexpr ChoiceField choice() {
  return {[](const TrainConfig& c) { return static_cast<int>((c.*Section).*Member); },
          [](TrainConfig& c, int index) {
            using Enum = std::remove_reference_t<decltype((c.*Section).*Member)>;
            (c.*Section).*Member = static_cast<Enum>(index);
          }};
}

using TC = TrainConfig;
using MC = ModelConfig;
using TO = TrainOptions;
using DC = DataConfig;
using LC = LogConfig;
using PC = ParallelConfig;
using CC = CheckpointConfig;
using CL = ClusterConfig;
using PR = PrecisionConfig;
using KT = KeyType;

// The names of config::PrecisionName, in its order.
constexpr std::string_view kPrecisionChoices =
    "compute|f32|bf16|fp8_current|fp8_delayed|fp8_blockwise|mxfp8|mxfp4|nvfp4";

constexpr Range at_least(double lo) {
  return Range{lo, HUGE_VAL, false, false};
}
constexpr Range above(double lo) {
  return Range{lo, HUGE_VAL, true, false};
}
// Counts the plan turns into int and multiplies (stages x chunks, units = layers + 2, MiB to
// bytes): bounded far above any real job so that no int() truncates and no product overflows.
constexpr double kMaxCount = 1 << 20;
constexpr Range count_from(double lo) {
  return Range{lo, kMaxCount, false, false};
}
// Numbers the model holds as float: positive and finite there (1e-300 became 0, 1e40 infinity).
constexpr Range positive_float() {
  return Range{std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), false, false};
}

const KeyInfo kKeys[] = {
    {"model.vocab_size", KT::integer, &field<&TC::model, &MC::vocab_size>,
     "tokens in the vocabulary; at least 256 for data.format text (bytes)", at_least(1)},
    {"model.dim", KT::integer, &field<&TC::model, &MC::dim>, "hidden size", at_least(1)},
    {"model.n_layers", KT::integer, &field<&TC::model, &MC::n_layers>, "transformer blocks",
     count_from(1)},
    {"model.n_heads", KT::integer, &field<&TC::model, &MC::n_heads>,
     "attention (query) heads; must divide dim, and dim/n_heads must be even (rotary)",
     at_least(1)},
    {"model.n_kv_heads", KT::integer, &field<&TC::model, &MC::n_kv_heads>,
     "key/value heads (grouped-query attention); must divide n_heads", at_least(1)},
    {"model.ffn_dim", KT::integer, &field<&TC::model, &MC::ffn_dim>, "SwiGLU hidden size",
     at_least(1)},
    {"model.seq_len", KT::integer, &field<&TC::model, &MC::seq_len>,
     "maximum context; also the training window (tokens per sequence)", at_least(1)},
    {"model.rope_theta", KT::number, &field<&TC::model, &MC::rope_theta>, "rotary embedding base",
     positive_float()},
    {"model.norm_eps", KT::number, &field<&TC::model, &MC::norm_eps>, "RMSNorm epsilon",
     positive_float()},
    {"model.tie_embeddings", KT::boolean, &field<&TC::model, &MC::tie_embeddings>,
     "LM head shares the token embedding"},
    {"model.rope_scaling_factor", KT::number, &field<&TC::model, &MC::rope_scaling_factor>,
     "Llama 3 RoPE scaling factor (Hugging Face rope_type llama3; Llama 3.1 uses 8); 0: none",
     at_least(0)},
    {"model.rope_low_freq_factor", KT::number, &field<&TC::model, &MC::rope_low_freq_factor>,
     "Llama 3 RoPE scaling: low_freq_factor", above(0)},
    {"model.rope_high_freq_factor", KT::number, &field<&TC::model, &MC::rope_high_freq_factor>,
     "Llama 3 RoPE scaling: high_freq_factor (above low_freq_factor)", above(0)},
    {"model.rope_original_max_positions", KT::integer,
     &field<&TC::model, &MC::rope_original_max_positions>,
     "Llama 3 RoPE scaling: original_max_position_embeddings", at_least(1)},
    {"model.bos_token_id", KT::integer, &field<&TC::model, &MC::bos_token_id>,
     "beginning-of-sequence token id; -1: none", at_least(-1)},
    {"model.eos_token_id", KT::integer, &field<&TC::model, &MC::eos_token_id>,
     "end-of-sequence token id (h2 generate stops there); -1: none", at_least(-1)},
    {"model.pad_token_id", KT::integer, &field<&TC::model, &MC::pad_token_id>,
     "padding token id; -1: none", at_least(-1)},

    {"train.batch_size", KT::integer, &field<&TC::train, &TO::batch_size>,
     "sequences per micro-batch (per rank)", at_least(1)},
    {"train.grad_accum", KT::integer, &field<&TC::train, &TO::grad_accum>,
     "micro-batches accumulated per optimizer step", count_from(1)},
    {"train.steps", KT::integer, &field<&TC::train, &TO::steps>, "optimizer steps", at_least(1)},
    {"train.lr", KT::number, &field<&TC::train, &TO::lr>, "peak learning rate (after warm-up)",
     above(0)},
    {"train.min_lr", KT::number, &field<&TC::train, &TO::min_lr>,
     "learning rate at the end of the cosine decay; <= lr", at_least(0)},
    {"train.warmup_steps", KT::integer, &field<&TC::train, &TO::warmup_steps>,
     "linear warm-up steps", at_least(0)},
    {"train.weight_decay", KT::number, &field<&TC::train, &TO::weight_decay>,
     "AdamW decoupled weight decay", at_least(0)},
    {"train.grad_clip", KT::number, &field<&TC::train, &TO::grad_clip>,
     "clip the global gradient norm to this; 0 disables", at_least(0)},
    {"train.seed", KT::integer, &field<&TC::train, &TO::seed>,
     "seed for initialisation and data sampling", at_least(0)},
    {"train.dtype",
     KT::dtype,
     &field<&TC::train, &TO::dtype>,
     "compute dtype; master weights stay f32",
     {},
     "f32|bf16"},
    {"train.device", KT::string, &field<&TC::train, &TO::device>,
     "cpu, cuda, cuda:N, vchip:N or vchip:NAME"},
    {"train.eval_every", KT::integer, &field<&TC::train, &TO::eval_every>,
     "steps between evaluations on the held-out split; 0 disables", at_least(0)},
    {"train.eval_batches", KT::integer, &field<&TC::train, &TO::eval_batches>,
     "micro-batches per evaluation", at_least(1)},

    {"data.path", KT::string, &field<&TC::data, &DC::path>,
     "training data: a file, a glob pattern of shards read in sorted order (fineweb_train_*.bin) "
     "or several of either separated by commas (a YAML list also works); relative to the working "
     "directory; required"},
    {"data.val_path", KT::string, &field<&TC::data, &DC::val_path>,
     "validation data, named like data.path (fineweb_val_*.bin); empty: the tail "
     "data.val_fraction of data.path"},
    {"data.format",
     KT::choice,
     choice<&TC::data, &DC::format>(),
     "text: bytes as tokens; bin: llm.c token files (header; uint16 or uint32 tokens); uint16: "
     "nanoGPT's headerless train.bin/val.bin",
     {},
     "text|bin|uint16"},
    {"data.val_fraction", KT::number, &field<&TC::data, &DC::val_fraction>,
     "fraction of the data held out for evaluation (when data.val_path is empty)",
     Range{0, 1, false, true}},

    {"log.every", KT::integer, &field<&TC::log, &LC::every>,
     "steps between progress lines and metrics records", at_least(1)},
    {"log.metrics_file", KT::string, &field<&TC::log, &LC::metrics_file>,
     "JSON-lines metrics file; empty: none"},
    {"log.trace_file", KT::string, &field<&TC::log, &LC::trace_file>,
     "Chrome trace file; empty: none"},

    {"parallel.mode",
     KT::choice,
     choice<&TC::parallel, &PC::mode>(),
     "single: one process; dp: data parallel over every rank the launcher started (h2run, "
     "mpirun, srun); pipeline: each rank runs pipeline stages (train.grad_accum micro-batches)",
     {},
     "single|dp|pipeline"},
    {"parallel.bucket_mb", KT::number, &field<&TC::parallel, &PC::bucket_mb>,
     "dp: MiB of gradients all-reduced together while backward continues",
     Range{0, kMaxCount, true, false}},
    {"parallel.schedule",
     KT::choice,
     choice<&TC::parallel, &PC::schedule>(),
     "pipeline: the schedule every rank runs",
     {},
     "gpipe|1f1b|interleaved-1f1b|zb-h1"},
    {"parallel.chunks", KT::integer, &field<&TC::parallel, &PC::chunks>,
     "pipeline: stages per rank (interleaved-1f1b; 1 otherwise)", count_from(1)},
    {"parallel.lead", KT::integer, &field<&TC::parallel, &PC::lead>,
     "pipeline, 1f1b: micro-batches each group runs ahead of the next, so that a slow link's "
     "round trip overlaps compute (more stashed activations)",
     count_from(0)},
    {"parallel.overlap", KT::boolean, &field<&TC::parallel, &PC::overlap>,
     "pipeline: transfers between ranks run while the rank computes; false: every send blocks "
     "its rank until its last byte has left the link (a baseline: the cost of no overlap)"},
    {"parallel.segment_kb", KT::integer, &field<&TC::parallel, &PC::segment_kb>,
     "pipeline: each activation or gradient transfer goes in segments of about this many KiB "
     "on the wire (at most 64 per piece), each converted to the wire dtype and sent as soon as "
     "it is, and converted back as it arrives; 0: one message per piece",
     count_from(0)},
    {"parallel.stage_layers", KT::string, &field<&TC::parallel, &PC::stage_layers>,
     "pipeline: transformer blocks per stage, comma-separated (\"3,1\"); empty: even split"},
    {"parallel.stage_ranks", KT::string, &field<&TC::parallel, &PC::stage_ranks>,
     "pipeline: ranks per stage group, comma-separated (\"2,1\"): a group splits each "
     "micro-batch's rows; empty: one rank each"},
    {"parallel.plan", KT::string, &field<&TC::parallel, &PC::plan>,
     "pipeline: a HeteroPP plan file (stages: layers, chip, ranks; h2 plan writes one) setting "
     "stage_layers, stage_ranks, cluster.devices and the other decisions it records; auto: "
     "HeteroAuto plans the job's cluster (cluster.file) at start and logs the plan"},
    {"parallel.profiles", KT::string, &field<&TC::parallel, &PC::profiles>,
     "parallel.plan auto: folder of cached chip profiles (h2 profile writes them; missing ones "
     "are measured by rank 0 first)"},
    {"parallel.wire_dtype",
     KT::choice,
     choice<&TC::parallel, &PC::wire_dtype>(),
     "pipeline: dtype of activations and gradients sent between ranks (bf16 halves the bytes, "
     "f8e4m3 quarters them: E4M3 codes with one FP32 scale per token); auto: the compute dtype",
     {},
     "auto|f32|bf16|f8e4m3"},
    {"parallel.recompute", KT::boolean, &field<&TC::parallel, &PC::recompute>,
     "pipeline: every block keeps only its input and recomputes its activations in backward "
     "(less memory, a third more compute)"},
    {"parallel.memory_check", KT::boolean, &field<&TC::parallel, &PC::memory_check>,
     "refuse at start a plan whose estimated memory exceeds a chip's; false leaves it to the "
     "device allocator (an out-of-memory error when a step runs out)"},
    {"parallel.replicas", KT::integer, &field<&TC::parallel, &PC::replicas>,
     "pipeline: data-parallel copies of the pipeline, each on its own micro-batches (the job's "
     "ranks / replicas per copy; gradients summed over the copies while backward runs)",
     count_from(1)},
    {"parallel.fsdp", KT::boolean, &field<&TC::parallel, &PC::fsdp>,
     "pipeline: shard each unit's parameters over its stage group (gathered for use, gradients "
     "reduce-scattered, AdamW on the shards)"},
    {"parallel.gather_group", KT::integer, &field<&TC::parallel, &PC::gather_group>,
     "pipeline + fsdp (ZeroPP): gather a stage once per this many micro-batches; 0: once per "
     "step",
     count_from(0)},

    {"cluster.file", KT::string, &field<&TC::cluster, &CL::file>,
     "cluster file (configs/clusters/*.yaml): rank r drives its chip r, links paced as it says; "
     "empty: H2_CLUSTER_FILE (h2run --cluster), else none"},
    {"cluster.devices", KT::string, &field<&TC::cluster, &CL::devices>,
     "one device per rank, comma-separated (vchip:chip-a,vchip:chip-b,...); empty: "
     "train.device everywhere"},

    {"precision.recipe",
     KT::choice,
     choice<&TC::precision, &PR::recipe>(),
     "GEMM recipe of every block linear: compute (train.dtype), fp8_current, fp8_delayed, "
     "fp8_blockwise, mxfp8, mxfp4, nvfp4",
     {},
     kPrecisionChoices},
    {"precision.modules", KT::string, &field<&TC::precision, &PR::modules>,
     "per-module recipes, later wins: \"layers.*.mlp=nvfp4; layers.*.self_attn=fp8_blockwise\" "
     "(YAML: or a map pattern: recipe; '*' matches within one dotted name segment)"},
    {"precision.keep_first", KT::integer, &field<&TC::precision, &PR::keep_first>,
     "first blocks kept at keep_recipe", at_least(0)},
    {"precision.keep_last", KT::integer, &field<&TC::precision, &PR::keep_last>,
     "last blocks kept at keep_recipe", at_least(0)},
    {"precision.keep_recipe",
     KT::choice,
     choice<&TC::precision, &PR::keep_recipe>(),
     "recipe of the kept first and last blocks",
     {},
     kPrecisionChoices},
    {"precision.target_after", KT::number, &field<&TC::precision, &PR::target_after>,
     "fraction of train.steps after which target_modules switch to target_recipe; 1: never",
     Range{0, 1, false, false}},
    {"precision.target_recipe",
     KT::choice,
     choice<&TC::precision, &PR::target_recipe>(),
     "the higher precision switched to after target_after",
     {},
     kPrecisionChoices},
    {"precision.target_modules", KT::string, &field<&TC::precision, &PR::target_modules>,
     "modules that switch (comma-separated globs)"},
    {"precision.mx_scale",
     KT::choice,
     choice<&TC::precision, &PR::mx_scale>(),
     "MX block scale rule: floor (OCP spec) or ceil (round-up, never saturates; trains MXFP4 "
     "closer to BF16, docs/numerics.md)",
     {},
     "floor|ceil"},
    {"precision.delayed_history", KT::integer, &field<&TC::precision, &PR::delayed_history>,
     "fp8_delayed: amax history length (micro-batches)", count_from(1)},
    {"precision.delayed_margin", KT::integer, &field<&TC::precision, &PR::delayed_margin>,
     "fp8_delayed: scale = max_finite / (amax * 2^margin)", count_from(0)},

    {"checkpoint.dir", KT::string, &field<&TC::checkpoint, &CC::dir>,
     "checkpoint directory; empty: no checkpoints"},
    {"checkpoint.every", KT::integer, &field<&TC::checkpoint, &CC::every>,
     "steps between checkpoints; 0: only at the end", at_least(0)},
    {"checkpoint.keep_last", KT::integer, &field<&TC::checkpoint, &CC::keep_last>,
     "checkpoints kept: each save keeps itself and the keep_last - 1 before it (higher "
     "steps, another run's, stay); 0 keeps all",
     at_least(0)},
    {"checkpoint.resume", KT::boolean, &field<&TC::checkpoint, &CC::resume>,
     "resume from the newest checkpoint in dir"},
    {"checkpoint.async", KT::boolean, &field<&TC::checkpoint, &CC::async>,
     "write checkpoints in the background while training goes on (one copy of the state in "
     "host memory meanwhile); the last one is always written before the run ends"},
};

bool in_choices(std::string_view choices, std::string_view text) {
  return choice_index(choices, text) >= 0;
}

[[noreturn]] void bad_value(const KeyInfo& key, std::string_view text, std::string_view where,
                            std::string_view problem) {
  H2_THROW(ConfigError, "{}: {} = '{}' {}", where, key.name, text, problem);
}

void check_range(const KeyInfo& key, double value, std::string_view text, std::string_view where) {
  if (!key.range.contains(value))
    H2_THROW(ConfigError, "{}: {} = {} is out of range (must be {})", where, key.name, text,
             key.range.str());
}

}  // namespace

bool Range::contains(double v) const {
  if (lo_open ? !(v > lo) : !(v >= lo)) return false;
  if (hi_open ? !(v < hi) : !(v <= hi)) return false;
  return true;
}

std::string Range::str() const {
  // Seven significant digits: whole counts as they are, float's limits readable.
  bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi)
    return fmt::format("in {}{:.7g}, {:.7g}{}", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
  if (has_lo) return fmt::format("{} {:.7g}", lo_open ? ">" : ">=", lo);
  if (has_hi) return fmt::format("{} {:.7g}", hi_open ? "<" : "<=", hi);
  return {};
}

std::string_view key_type_name(KeyType type) {
  switch (type) {
    case KeyType::integer:
      return "integer";
    case KeyType::number:
      return "number";
    case KeyType::boolean:
      return "bool";
    case KeyType::string:
      return "string";
    case KeyType::dtype:
      return "dtype";
    case KeyType::choice:
      return "choice";
  }
  return "?";
}

int choice_index(std::string_view choices, std::string_view text) {
  size_t start = 0;
  for (int index = 0; start <= choices.size(); ++index) {
    size_t bar = choices.find('|', start);
    if (bar == std::string_view::npos) bar = choices.size();
    if (choices.substr(start, bar - start) == text) return index;
    start = bar + 1;
  }
  return -1;
}

std::string_view choice_name(std::string_view choices, int index) {
  size_t start = 0;
  for (int i = 0; start <= choices.size(); ++i) {
    size_t bar = choices.find('|', start);
    if (bar == std::string_view::npos) bar = choices.size();
    if (i == index) return choices.substr(start, bar - start);
    start = bar + 1;
  }
  return {};
}

std::span<const KeyInfo> keys() {
  return kKeys;
}

const KeyInfo* find_key(std::string_view name) {
  for (const KeyInfo& key : kKeys)
    if (key.name == name) return &key;
  return nullptr;
}

bool is_section(std::string_view name) {
  for (const KeyInfo& key : kKeys)
    if (key.section() == name) return true;
  return false;
}

std::string closest_key(std::string_view name) {
  // The same leaf in another section ("train.seq_len" -> "model.seq_len") is the likeliest slip.
  std::string_view leaf = name.substr(name.find('.') + 1);
  if (name.find('.') != std::string_view::npos)
    for (const KeyInfo& key : kKeys)
      if (key.leaf() == leaf) return std::string(key.name);
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  auto consider = [&](std::string_view candidate) {
    size_t d = edit_distance(name, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  };
  for (const KeyInfo& key : kKeys) {
    consider(key.name);
    consider(key.section());
  }
  return best;
}

void set_from_text(const KeyInfo& key, TrainConfig& config, std::string_view text,
                   std::string_view where) {
  std::string s(text);
  if (key.type != KeyType::string && s.empty()) bad_value(key, text, where, "has no value");
  switch (key.type) {
    case KeyType::integer: {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (*end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
        bad_value(key, text, where, "is not an integer");
      if (errno == ERANGE) bad_value(key, text, where, "is too large");
      check_range(key, double(v), text, where);
      *std::get<int64_t* (*)(TrainConfig&)>(key.field)(config) = v;
      return;
    }
    case KeyType::number: {
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      if (*end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
        bad_value(key, text, where, "is not a number");
      if (!std::isfinite(v)) bad_value(key, text, where, "is not a finite number");
      check_range(key, v, text, where);
      *std::get<double* (*)(TrainConfig&)>(key.field)(config) = v;
      return;
    }
    case KeyType::boolean: {
      bool* out = std::get<bool* (*)(TrainConfig&)>(key.field)(config);
      if (s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "on" || s == "1")
        *out = true;
      else if (s == "false" || s == "False" || s == "FALSE" || s == "no" || s == "off" || s == "0")
        *out = false;
      else
        bad_value(key, text, where, "is not a boolean (true or false)");
      return;
    }
    case KeyType::string:
      if (!key.choices.empty() && !in_choices(key.choices, s))
        bad_value(key, text, where, fmt::format("is not one of {}", key.choices));
      // Strings go into JSON (dump_json, the metrics log), which holds only UTF-8.
      if (const size_t bad = invalid_utf8_at(s); bad != std::string_view::npos)
        H2_THROW(ConfigError, "{}: {} = '{}' is not valid UTF-8 (byte 0x{:02x} at offset {})",
                 where, key.name, escaped(s), static_cast<unsigned char>(s[bad]), bad);
      *std::get<std::string* (*)(TrainConfig&)>(key.field)(config) = s;
      return;
    case KeyType::dtype:
      if (!key.choices.empty() && !in_choices(key.choices, s))
        bad_value(key, text, where, fmt::format("is not one of {}", key.choices));
      *std::get<DType* (*)(TrainConfig&)>(key.field)(config) = parse_dtype(s);
      return;
    case KeyType::choice: {
      const int index = choice_index(key.choices, s);
      if (index < 0) bad_value(key, text, where, fmt::format("is not one of {}", key.choices));
      std::get<ChoiceField>(key.field).set(config, index);
      return;
    }
  }
}

std::string value_text(const KeyInfo& key, const TrainConfig& config) {
  // The accessors take a mutable config; reading through them does not modify it.
  auto& c = const_cast<TrainConfig&>(config);
  switch (key.type) {
    case KeyType::integer:
      return fmt::format("{}", *std::get<int64_t* (*)(TrainConfig&)>(key.field)(c));
    case KeyType::number:  // shortest text that reads back to the same double
      return fmt::format("{}", *std::get<double* (*)(TrainConfig&)>(key.field)(c));
    case KeyType::boolean:
      return *std::get<bool* (*)(TrainConfig&)>(key.field)(c) ? "true" : "false";
    case KeyType::string:
      return quoted(*std::get<std::string* (*)(TrainConfig&)>(key.field)(c));
    case KeyType::dtype:
      return std::string(dtype_name(*std::get<DType* (*)(TrainConfig&)>(key.field)(c)));
    case KeyType::choice:
      return std::string(choice_name(key.choices, std::get<ChoiceField>(key.field).get(config)));
  }
  return {};
}

}  // namespace h2::config
