// The training configuration: plain structs with defaults, one section per YAML map (model, train,
// data, log, parallel, checkpoint; names are the contract users learn from `h2 train --help`), and
// the functions that load, override, validate, document and dump it. Every key is described once,
// in the key table (keys.h); loading, `--set`, the help text and the YAML dump are all derived from
// it.
//
// Errors are h2::ConfigError, raised before any work, naming the key, the value and where the value
// came from: "FILE:LINE" for YAML, "--set" for overrides, "default" otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/lowp/precision_policy.h"
#include "parallel/pipeline/generators.h"
#include "train/data/dataset.h"

namespace h2::config {

// Decoder-only Llama hyper-parameters (models/llama).
struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t dim = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t ffn_dim = 344;
  // The model's maximum context. It is also the training window: every training and evaluation
  // sequence is model.seq_len tokens (there is no separate train.seq_len).
  int64_t seq_len = 128;
  double rope_theta = 10000.0;
  // Llama 3 RoPE scaling (Hugging Face rope_type "llama3"); factor 0: plain RoPE.
  double rope_scaling_factor = 0;
  double rope_low_freq_factor = 1;
  double rope_high_freq_factor = 4;
  int64_t rope_original_max_positions = 8192;
  double norm_eps = 1e-5;
  bool tie_embeddings = true;
  // Special tokens (-1: none), carried to and from Hugging Face folders (config.json,
  // generation_config.json) and used by h2 generate to stop at the end of a sequence.
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  int64_t pad_token_id = -1;
  bool operator==(const ModelConfig&) const = default;
};

// The optimisation loop.
struct TrainOptions {
  int64_t batch_size = 8;  // sequences per micro-batch (per rank)
  int64_t grad_accum = 1;  // micro-batches per optimizer step
  int64_t steps = 1000;
  double lr = 1e-3;      // peak learning rate, reached after warmup_steps
  double min_lr = 1e-4;  // end of the cosine decay
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global gradient-norm clip; 0 disables
  int64_t seed = 1337;
  DType dtype = DType::f32;    // compute dtype (f32 or bf16); master weights are always f32
  std::string device = "cpu";  // cpu, cpu:N, cuda, cuda:N, vchip:N, vchip:NAME
  int64_t eval_every = 100;    // steps between evaluations; 0 disables
  int64_t eval_batches = 8;    // micro-batches per evaluation
  bool operator==(const TrainOptions&) const = default;
};

// The enums of choice keys (keys.cpp lists each key's names in the enum's order).
enum class ParallelMode { single, dp, pipeline };     // "single|dp|pipeline"
enum class WireDtype { compute, f32, bf16, f8e4m3 };  // "auto|f32|bf16|f8e4m3"
using data::DataFormat;                               // "text|bin|uint16"
using parallel::pipeline::ScheduleKind;               // "gpipe|1f1b|interleaved-1f1b|zb-h1"
// precision.recipe, keep_recipe, target_recipe: "compute|f32|bf16|fp8_current|fp8_delayed|
// fp8_blockwise|mxfp8|mxfp4|nvfp4"; f32 and bf16 must name train.dtype (checked at load).
enum class PrecisionName {
  compute,
  f32,
  bf16,
  fp8_current,
  fp8_delayed,
  fp8_blockwise,
  mxfp8,
  mxfp4,
  nvfp4
};
using lowp::MxScaleRule;  // precision.mx_scale: "floor|ceil"

struct DataConfig {
  // A file, a glob pattern of shards or a comma-separated list (train/data/dataset.h:
  // expand_data_paths) in `format`. Relative paths are relative to the working directory.
  std::string path;      // required
  std::string val_path;  // validation data named the same way; empty: the tail of `path`
  DataFormat format = DataFormat::text;
  double val_fraction = 0.1;  // tail fraction held out for evaluation when val_path is empty
  bool operator==(const DataConfig&) const = default;
};

struct LogConfig {
  int64_t every = 10;        // steps between progress lines / metrics records
  std::string metrics_file;  // JSON lines; empty: none
  std::string trace_file;    // Chrome trace; empty: none
  bool operator==(const LogConfig&) const = default;
};

// How the ranks of a job share the work: the plan of train/config/job_plan.h.
struct ParallelConfig {
  // single: one process; dp: data parallel over every rank of the job (replicated model,
  // gradients all-reduced in buckets while backward runs); pipeline: every rank of the job is
  // one pipeline stage (or `chunks` stages, interleaved), train.grad_accum micro-batches per step.
  ParallelMode mode = ParallelMode::single;
  double bucket_mb = 25;                        // gradient all-reduce bucket size in MiB (dp)
  ScheduleKind schedule = ScheduleKind::k1F1B;  // pipeline: gpipe, 1f1b, interleaved-1f1b, zb-h1
  int64_t chunks = 1;  // pipeline: model chunks (stages) per rank, interleaved-1f1b
  int64_t lead = 0;    // pipeline, 1f1b: micro-batches each group runs ahead of the next
  // pipeline: transfers run while the rank computes; false: every send blocks its rank until its
  // last byte has left (the baseline that shows what overlap buys).
  bool overlap = true;
  // pipeline: KiB of wire bytes per segment of an activation or gradient transfer; 0: whole.
  int64_t segment_kb = 0;
  std::string stage_layers;  // pipeline: blocks per stage, "3,1"; empty: as even as possible
  // pipeline: ranks per stage group, "2,1" (HeteroPP: a group splits each micro-batch's rows);
  // empty: one rank per group.
  std::string stage_ranks;
  // pipeline: a HeteroPP plan file (config/plan.h) that sets stage_layers, stage_ranks and
  // cluster.devices; "auto": HeteroAuto plans the job's cluster at start; empty: those keys.
  std::string plan;
  std::string profiles = "profiles";  // parallel.plan auto: the folder of cached chip profiles
  // pipeline: activations between ranks: auto (the compute dtype), f32, bf16, f8e4m3
  WireDtype wire_dtype = WireDtype::compute;
  bool recompute = false;  // pipeline: blocks recompute their activations in backward
  // Refuse at start a plan whose shape-based memory estimate exceeds a chip (false: leave it to
  // the device allocator, which fails the step that runs out).
  bool memory_check = true;
  int64_t replicas = 1;  // pipeline: data-parallel copies of the pipeline (ranks / replicas each)
  bool fsdp = false;     // pipeline: shard every unit's parameters over its stage group
  int64_t gather_group = 0;  // pipeline + fsdp: ZeroPP, gather per G micro-batches; 0: per step
  bool operator==(const ParallelConfig&) const = default;
};

// The chips each rank drives (an emulated or real mixed cluster).
struct ClusterConfig {
  // A cluster file (configs/clusters/*.yaml): rank r drives the file's chip r (virtual chips
  // registered from the file, transfers between them paced by its links); empty: the
  // H2_CLUSTER_FILE that h2run --cluster sets, or no cluster.
  std::string file;
  // One device per rank, comma-separated ("vchip:chip-a,vchip:chip-a,vchip:chip-b"); empty:
  // every rank uses train.device.
  std::string devices;
  bool operator==(const ClusterConfig&) const = default;
};

// Low-precision GEMMs of the block linear layers (core/lowp/precision_policy.h has the rules).
struct PrecisionConfig {
  PrecisionName recipe = PrecisionName::compute;  // default recipe of every block linear
  std::string modules;     // "pattern=recipe; ..." (YAML: also a map pattern: recipe)
  int64_t keep_first = 0;  // first blocks kept at keep_recipe
  int64_t keep_last = 0;   // last blocks kept at keep_recipe
  PrecisionName keep_recipe = PrecisionName::compute;
  double target_after = 1;  // fraction of train.steps after which target_modules switch; 1: never
  PrecisionName target_recipe = PrecisionName::compute;
  std::string target_modules = "*";
  MxScaleRule mx_scale = MxScaleRule::floor;  // MX scale rule: floor (OCP) or ceil (round-up)
  int64_t delayed_history = 1024;             // fp8_delayed amax history length (micro-batches)
  int64_t delayed_margin = 0;                 // fp8_delayed: scale = max_finite / (amax * 2^margin)
  bool operator==(const PrecisionConfig&) const = default;
};

struct CheckpointConfig {
  std::string dir;        // empty: no checkpoints
  int64_t every = 0;      // steps between checkpoints; 0: only at the end (when dir is set)
  int64_t keep_last = 3;  // 0 keeps all
  bool resume = false;    // resume from the newest checkpoint in dir if there is one
  bool async = false;     // write in the background while training goes on (async_save.h)
  bool operator==(const CheckpointConfig&) const = default;
};

// What HeteroAuto predicted for the plan a config runs (from a plan file, or planned at start),
// reported beside the measured figures. Not a config key.
struct PlanPrediction {
  double step_ms = 0;
  double tokens_per_s = 0;
  std::vector<double> peak_mib;  // per stage group, one rank's
  std::vector<double> busy_ms;   // per stage group, compute per step
};

struct TrainConfig {
  ModelConfig model;
  TrainOptions train;
  DataConfig data;
  LogConfig log;
  ParallelConfig parallel;
  ClusterConfig cluster;
  CheckpointConfig checkpoint;
  PrecisionConfig precision;
  // Where each key's value came from ("FILE:LINE", "--set"); keys absent here are defaults. Not
  // part of equality.
  std::map<std::string, std::string> origin;
  std::optional<PlanPrediction> prediction;  // not part of equality

  bool operator==(const TrainConfig& o) const {
    return model == o.model && train == o.train && data == o.data && log == o.log &&
           parallel == o.parallel && cluster == o.cluster && checkpoint == o.checkpoint &&
           precision == o.precision;
  }
  // "FILE:LINE", "--set" or "default".
  std::string origin_of(std::string_view key) const;
};

// Cross-field checks of the precision section (recipe names, rules, compute dtype).
void check_precision(const TrainConfig& config);
// The policy the precision section describes (config validated).
lowp::PrecisionPolicy precision_policy(const TrainConfig& config);

// Reads a YAML file and applies `overrides` ("section.key=value", in order, later wins), then
// validates (including that data.path exists). Throws ConfigError.
TrainConfig load_config(const std::string& path, std::span<const std::string> overrides = {});

// Parses YAML text; `source` names it in messages (a file name). Does not validate.
TrainConfig parse_yaml(std::string_view text, const std::string& source);

// Applies one "section.key=value" override to `config`, recording "--set" as its origin.
void apply_override(TrainConfig& config, std::string_view assignment);

struct ValidateOptions {
  bool check_files = true;  // data.path must exist
};

// Range and cross-field checks (heads divide dim, even head dim, ...). Throws ConfigError.
void validate(const TrainConfig& config, ValidateOptions options = {});

// The device rank `rank` of `ranks` trains on: its entry of cluster.devices, or train.device.
// ConfigError when cluster.devices lists another number of devices than there are ranks.
std::string device_for_rank(const TrainConfig& config, int rank, int ranks);

// parallel.stage_layers / stage_ranks ("3,1") as counts; ConfigError naming `key` and a bad item.
std::vector<int> stage_layer_counts(const std::string& text,
                                    std::string_view key = "parallel.stage_layers");

// Every key as a table (key, type, default, meaning), for `h2 train --help`.
std::string help_table();

// The effective configuration as YAML that parse_yaml reads back to an equal TrainConfig.
std::string dump_yaml(const TrainConfig& config);

// The effective configuration as JSON text, {"model": {"dim": 128, ...}, ...}: numbers and
// booleans typed, everything else as text (the start record of the metrics file).
std::string dump_json(const TrainConfig& config);

// Writes dump_yaml(config) to `path`; throws h2::Error when the file cannot be written.
void write_yaml(const TrainConfig& config, const std::string& path);

}  // namespace h2::config
