// The training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "core/env.h"
#include "core/error.h"
#include "core/tensor_host.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "parallel/dp/gradient_reducer.h"
#include "parallel/exact_gather.h"
#include "parallel/fsdp/sharded_adamw.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/pipeline/pipeline_runtime.h"
#include "parallel/pipeline/simulator.h"
#include "parallel/pipeline/trace_events.h"
#include "parallel/pipeline/validator.h"
#include "train/checkpoint/checkpoint.h"
#include "train/config/plan.h"
#include "train/data/sampler.h"
#include "train/precision_report.h"

namespace h2::train {

using optim::AdamW;
using optim::AdamwOptions;
using optim::clip_scale;
using optim::LrSchedule;
using optim::ParamRef;

namespace {

using Clock = std::chrono::steady_clock;

std::vector<ParamRef> param_refs(const std::vector<nn::Param*>& params) {
  std::vector<ParamRef> refs;
  for (const nn::Param* p : params) refs.push_back({p->name, p->value, p->grad});
  return refs;
}

// What a `parallel.mode: pipeline` run over `group` executes: the stage layout, the schedule
// (generated, lowered and validated) and the stage groups' sizes.
struct PipelinePlan {
  parallel::pipeline::StageLayout layout;
  parallel::pipeline::Schedule schedule;
  std::vector<int> group_sizes;  // empty: one rank per schedule position
};

// Builds the plan and refuses it, before the model exists, when this rank's stages would not fit
// its device (`device`).
PipelinePlan plan_pipeline(const config::TrainConfig& cfg, comm::Communicator& group,
                           const Device& device) {
  namespace pp = parallel::pipeline;
  const auto kind = pp::parse_schedule_kind(cfg.parallel.schedule);
  H2_CHECK(kind.has_value(), "unknown schedule '{}'", cfg.parallel.schedule);
  // Schedule positions: stage groups of parallel.stage_ranks ranks each, or one rank each.
  std::vector<int> group_sizes;
  if (!cfg.parallel.stage_ranks.empty())
    group_sizes = config::stage_layer_counts(cfg.parallel.stage_ranks, "parallel.stage_ranks");
  const int positions = group_sizes.empty() ? group.size() : int(group_sizes.size());
  const int stages = positions * int(cfg.parallel.chunks);
  const int layers = int(cfg.model.n_layers);
  pp::StageLayout layout;
  if (cfg.parallel.stage_layers.empty()) {
    layout = pp::StageLayout::uniform(layers, stages);
  } else {
    const std::vector<int> blocks = config::stage_layer_counts(cfg.parallel.stage_layers);
    if (int(blocks.size()) != stages)
      H2_THROW(ConfigError,
               "parallel.stage_layers = '{}' ({}) lists {} stages; {} stage groups x "
               "parallel.chunks {} make {}",
               cfg.parallel.stage_layers, cfg.origin_of("parallel.stage_layers"), blocks.size(),
               positions, cfg.parallel.chunks, stages);
    layout = pp::StageLayout::from_block_counts(blocks, layers);
  }
  pp::LoweringOptions lowering;
  lowering.fsdp = cfg.parallel.fsdp;
  lowering.unshard.group_size = int(cfg.parallel.gather_group);
  pp::Schedule schedule =
      pp::lower(pp::generate(*kind, positions, int(cfg.train.grad_accum), int(cfg.parallel.chunks)),
                lowering);
  pp::check_valid(schedule);
  // Refuse a plan whose stages cannot fit their chips, before any work: this rank's stages'
  // estimated peak (the schedule's stash peak of micro-batches in flight) against its device.
  int position = 0;
  for (int first = 0; position < positions; ++position) {
    first += group_sizes.empty() ? 1 : group_sizes[size_t(position)];
    if (group.rank() < first) break;
  }
  const int group_size = group_sizes.empty() ? 1 : group_sizes[size_t(position)];
  const int stashed = pp::peak_stash(schedule).at(size_t(position));
  int64_t need = 0;
  for (int s = position; s < stages; s += positions) {
    // Units: 0 the embedding, b + 1 block b, layers + 1 the head.
    const int first_block = std::max(layout.begin(s), 1) - 1;
    const int last_block = std::min(layout.end(s), layers + 1) - 2;
    need += config::estimate_stage_memory(cfg, first_block, last_block, s == 0, s == stages - 1,
                                          group_size, stashed)
                .total();
  }
  const int64_t capacity = device.props().memory_bytes;
  if (capacity > 0 && need > capacity)
    H2_THROW(ConfigError,
             "rank {} ({}, schedule position {}): its stages need about {:.1f} MiB, the chip "
             "has {:.1f} MiB; move layers to a chip with more memory or enlarge the group",
             group.rank(), device.str(), position, double(need) / (1 << 20),
             double(capacity) / (1 << 20));
  return {std::move(layout), std::move(schedule), std::move(group_sizes)};
}

// Each unit's gradients, units in forward order (what the gradient reducer buckets).
std::vector<std::vector<Tensor>> grads_per_unit(models::Llama& model) {
  std::vector<std::vector<Tensor>> grads;
  for (models::Unit* unit : model.units()) {
    std::vector<models::Param*> params;
    unit->collect(params);
    grads.emplace_back();
    for (models::Param* p : params) grads.back().push_back(p->grad);
  }
  return grads;
}

}  // namespace

models::LlamaConfig llama_config(const config::ModelConfig& m) {
  return {.vocab_size = m.vocab_size,
          .dim = m.dim,
          .n_layers = m.n_layers,
          .n_heads = m.n_heads,
          .n_kv_heads = m.n_kv_heads,
          .ffn_dim = m.ffn_dim,
          .seq_len = m.seq_len,
          .rope_theta = float(m.rope_theta),
          .norm_eps = float(m.norm_eps),
          .tie_embeddings = m.tie_embeddings};
}

double training_flops_per_token(const models::LlamaConfig& cfg, int64_t num_parameters) {
  // The input embedding is a lookup, not a matmul: leave it out unless the head shares it.
  double matmul_parameters = double(num_parameters);
  if (!cfg.tie_embeddings) matmul_parameters -= double(cfg.vocab_size * cfg.dim);
  return 6.0 * matmul_parameters + 6.0 * double(cfg.n_layers * cfg.seq_len * cfg.dim);
}

struct Trainer::State {
  const config::TrainConfig& config;
  Runtime& runtime;
  Device& device;
  comm::Communicator* group;      // the job's ranks (dp or pipeline); nullptr: a single process
  int rank = 0;                   // in `group`; rank 0 prints and writes metrics
  int dp_rank = 0, dp_ranks = 1;  // data-parallel position (one replica when pipelining)
  std::function<void(const std::string&)> print;  // no-op on ranks other than 0
  data::TokenDataset dataset;
  data::DataSplit split;
  std::unique_ptr<models::Llama> model;
  std::unique_ptr<AdamW> optimizer;                       // replicated parameters
  std::unique_ptr<parallel::fsdp::ShardedAdamW> sharded;  // FSDP: the shards instead
  std::unique_ptr<data::WindowSampler> sampler;
  std::unique_ptr<parallel::GradientReducer> reducer;             // dp only
  std::unique_ptr<parallel::pipeline::PipelineRuntime> pipeline;  // pipeline only
  std::unique_ptr<parallel::pipeline::Timeline> timeline;         // pipeline only, during run()
  MetricsLog metrics;
  LrSchedule schedule;
  double flops_per_token = 0;
  int64_t num_parameters = 0;
  double peak_flops = 0;            // the job's: every rank's device peak added
  lowp::PrecisionPolicy precision;  // the block linears' GEMM recipes over the run
  // The sampler position (global micro-batches drawn) at the start of step `base_step`.
  int64_t base_step = 0;
  uint64_t base_position = 0;

  State(const config::TrainConfig& cfg, Runtime& rt, std::function<void(const std::string&)> out,
        comm::Communicator* job)
      : config(cfg),
        runtime(rt),
        device(rt.device(config::device_for_rank(cfg, job != nullptr ? job->rank() : 0,
                                                 job != nullptr ? job->size() : 1))),
        group(job),
        rank(job != nullptr ? job->rank() : 0),
        dp_rank(job != nullptr && cfg.parallel.mode == "dp" ? job->rank() : 0),
        dp_ranks(job != nullptr && cfg.parallel.mode == "dp" ? job->size() : 1),
        print(rank == 0 ? std::move(out) : [](const std::string&) {}),
        dataset(data::TokenDataset::load(cfg.data.path, data::parse_data_format(cfg.data.format))),
        split(dataset.split(cfg.data.val_fraction, cfg.model.seq_len)),
        metrics(rank == 0 ? cfg.log.metrics_file : std::string(), resuming(cfg)) {
    dataset.check_vocab(cfg.model.vocab_size);
    models::LlamaConfig llama = llama_config(cfg.model);
    std::optional<PipelinePlan> plan;
    if (cfg.parallel.mode == "pipeline") {
      H2_CHECK(group != nullptr, "parallel.mode pipeline needs the job's communicator");
      plan = plan_pipeline(cfg, *group, device);
    }
    model = std::make_unique<models::Llama>(
        llama, device,
        models::LlamaOptions{.dtype = cfg.train.dtype, .seed = uint64_t(cfg.train.seed)});
    num_parameters = model->num_parameters();  // before FSDP releases the full values
    precision = config::precision_policy(cfg);
    flops_per_token = training_flops_per_token(llama, num_parameters);
    // Every rank's peak, for MFU: mixed clusters add different chips.
    const double my_peak = device.props().peak(cfg.train.dtype);
    peak_flops = my_peak;
    if (group != nullptr) {
      peak_flops = 0;
      for (const auto& peak : parallel::gather_doubles(*group, rt.cpu(), {my_peak}))
        peak_flops += peak[0];
    }
    if (plan)
      pipeline = std::make_unique<parallel::pipeline::PipelineRuntime>(
          *model, std::move(plan->layout), std::move(plan->schedule), *group, cfg.model.seq_len,
          std::move(plan->group_sizes), cfg.parallel.fsdp);
    if (pipeline && cfg.parallel.wire_dtype != "auto")
      pipeline->set_wire_dtype(parse_dtype(cfg.parallel.wire_dtype));
    const AdamwOptions adamw{.weight_decay = cfg.train.weight_decay};
    if (pipeline && pipeline->fsdp())
      sharded = std::make_unique<parallel::fsdp::ShardedAdamW>(pipeline->flat_groups(), adamw);
    else
      optimizer = std::make_unique<AdamW>(
          param_refs(pipeline ? pipeline->owned_parameters() : nn::parameters_of(*model)), adamw);
    sampler = std::make_unique<data::WindowSampler>(split.train, cfg.train.batch_size,
                                                    cfg.model.seq_len, uint64_t(cfg.train.seed));
    schedule = {.lr = cfg.train.lr,
                .min_lr = cfg.train.min_lr,
                .warmup_steps = cfg.train.warmup_steps,
                .total_steps = cfg.train.steps};
    if (cfg.parallel.mode == "dp" && group != nullptr)
      reducer = std::make_unique<parallel::GradientReducer>(
          *group, grads_per_unit(*model), size_t(cfg.parallel.bucket_mb * (1 << 20)), rt.cpu());
  }

  // Resume when asked, or when h2run restarted the job after a failure.
  static bool resuming(const config::TrainConfig& cfg) {
    return !cfg.checkpoint.dir.empty() &&
           (cfg.checkpoint.resume || env_int("H2_RESTART", 0, 1L << 30) > 0);
  }

  // Micro-batches of one optimizer step, over all ranks.
  int64_t global_micro_batches() const { return config.train.grad_accum * dp_ranks; }

  // The global gradient norm. Pipelining: each parameter's sum of squares comes from the rank
  // that counts it, added in Hugging Face order like one process, so the norm is bit-identical.
  double grad_norm() {
    if (sharded) return sharded->grad_norm(*group);
    if (!pipeline) return optimizer->grad_norm();
    const auto all = model->named_parameters();
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < all.size(); ++i) index[all[i].name] = i;
    std::vector<double> mine(2 * all.size(), 0.0);  // sums, then "counted here" flags
    const std::vector<double> sums = optimizer->grad_sum_squares();
    for (size_t i = 0; i < sums.size(); ++i) {
      const std::string& name = optimizer->params()[i].name;
      if (!pipeline->counts_in_norm(name)) continue;
      mine[index.at(name)] = sums[i];
      mine[all.size() + index.at(name)] = 1;
    }
    const auto gathered = parallel::gather_doubles(*group, runtime.cpu(), mine);
    double total = 0;
    for (size_t i = 0; i < all.size(); ++i)
      for (const auto& from : gathered)
        if (from[all.size() + i] == 1) total += from[i];
    return std::sqrt(total);
  }

  uint64_t position_at(int64_t step) const {
    return base_position + uint64_t((step - base_step) * global_micro_batches());
  }

  // Writes DIR/step_NNNNNN after `steps` optimizer steps: each rank its even share of the rows
  // of every tensor (collective).
  void save(int64_t steps) {
    checkpoint::RankContents mine = sharded ? fsdp_contents() : replicated_contents();
    const checkpoint::TrainerState state{steps, position_at(steps), config::dump_yaml(config),
                                         group != nullptr ? group->size() : 1};
    std::string where = checkpoint::save_checkpoint(group, config.checkpoint.dir, state, mine,
                                                    config.checkpoint.keep_last);
    print(fmt::format("checkpoint: {}", where));
  }

  // FSDP: each unit's masters and moments gathered over its stage group into whole tensors,
  // written by the group's rank 0 (collective over every stage group).
  checkpoint::RankContents fsdp_contents() {
    checkpoint::RankContents mine;
    const auto& units = sharded->units();
    for (size_t i = 0; i < units.size(); ++i) {
      parallel::fsdp::FlatParamGroup& f = *units[i];
      auto gather = [&](const Tensor& shard) {
        Tensor full = Tensor::empty({f.padded_numel()}, DType::f32, f.device());
        f.group().all_gather(full, shard);
        return full;
      };
      const Tensor master = gather(f.master_shard()), m = gather(sharded->state()[i].m),
                   v = gather(sharded->state()[i].v);
      const bool writer = f.group().rank() == 0;
      for (const auto& slot : f.layout()) {
        auto piece = [&](const Tensor& full) {
          return full.slice(0, slot.offset, slot.offset + slot.numel).view(slot.shape);
        };
        const int64_t rows = writer ? checkpoint::shard_rows(slot.shape) : 0;
        auto own = [&](std::vector<checkpoint::OwnedRows>& out, const std::string& name,
                       const Tensor& full) {
          out.push_back({name, DType::f32, slot.shape, 0, rows,
                         writer ? checkpoint::store(piece(full)) : checkpoint::StoredTensor{}});
        };
        own(mine.model, slot.name, master);
        own(mine.optimizer, "m/" + slot.name, m);
        own(mine.optimizer, "v/" + slot.name, v);
      }
    }
    return mine;
  }

  checkpoint::RankContents replicated_contents() {
    checkpoint::RankContents mine;
    const auto& params = optimizer->params();
    // Data parallel: an even share of every tensor's rows. Pipelining: whole tensors of this
    // rank's stages (a tied table written by the first stage's rank only).
    auto own = [&](std::vector<checkpoint::OwnedRows>& out, const std::string& name,
                   const std::string& param, const Tensor& t) {
      const int64_t rows = checkpoint::shard_rows(t.shape());
      const auto [begin, end] =
          pipeline ? std::pair<int64_t, int64_t>{0, pipeline->counts_in_norm(param) ? rows : 0}
                   : checkpoint::even_rows(rows, dp_rank, dp_ranks);
      out.push_back(
          {name, t.dtype(), t.shape(), begin, end,
           begin < end ? checkpoint::store_rows(t, begin, end) : checkpoint::StoredTensor{}});
    };
    for (size_t i = 0; i < params.size(); ++i) {
      const AdamW::State& st = optimizer->state()[i];
      const std::string& name = params[i].name;
      own(mine.model, name, name, st.master);
      own(mine.optimizer, "m/" + name, name, st.m);
      own(mine.optimizer, "v/" + name, name, st.v);
    }
    return mine;
  }

  // Loads the newest checkpoint in checkpoint.dir (written by any number of ranks); returns the
  // steps it had completed (0: none). A checkpoint without optimizer state (`h2 import`) starts
  // the moments at zero.
  int64_t resume() {
    auto latest = checkpoint::latest_checkpoint(config.checkpoint.dir);
    if (!latest) return 0;
    checkpoint::TrainerState saved = checkpoint::read_trainer_state(*latest);
    checkpoint::CheckpointReader reader(*latest);
    const bool has_moments = !reader.manifest().optimizer.empty();
    if (sharded) {
      resume_shards(reader, has_moments);
      sharded->restore_steps(saved.step);
    } else {
      resume_replicated(reader, has_moments, *latest);
      optimizer->sync_params_from_masters();
      optimizer->restore_steps(saved.step);
    }
    base_step = saved.step;
    base_position = saved.sampler_position;
    print(fmt::format("resumed from {} (step {}, written by {} rank{})", *latest, saved.step,
                      saved.world_size, saved.world_size == 1 ? "" : "s"));
    return saved.step;
  }

  // FSDP: each unit's whole tensors laid out flat, this rank's shard taken.
  void resume_shards(checkpoint::CheckpointReader& reader, bool has_moments) {
    const auto& units = sharded->units();
    for (size_t i = 0; i < units.size(); ++i) {
      parallel::fsdp::FlatParamGroup& f = *units[i];
      auto load = [&](Tensor shard, const std::string& prefix) {
        Tensor full = Tensor::zeros({f.padded_numel()}, DType::f32, runtime.cpu());
        for (const auto& slot : f.layout()) {
          const checkpoint::StoredTensor t = reader.read(
              prefix.empty() ? checkpoint::Section::model : checkpoint::Section::optimizer,
              prefix + slot.name);
          H2_CHECK(t.dtype == DType::f32 && t.shape == slot.shape, "{}: '{}{}' is {} {}",
                   reader.dir(), prefix, slot.name, dtype_name(t.dtype), t.shape.str());
          std::memcpy(static_cast<char*>(full.data()) + slot.offset * 4, t.bytes.data(),
                      t.bytes.size());
        }
        shard.copy_from(full.slice(0, f.shard_offset(), f.shard_offset() + f.shard_numel()));
      };
      load(f.master_shard(), "");
      if (!has_moments) continue;
      load(sharded->state()[i].m, "m/");
      load(sharded->state()[i].v, "v/");
    }
  }

  void resume_replicated(checkpoint::CheckpointReader& reader, bool has_moments,
                         const std::string& latest) {
    const auto& params = optimizer->params();
    for (size_t i = 0; i < params.size(); ++i) {
      AdamW::State& st = optimizer->state()[i];
      const std::string& name = params[i].name;
      const std::string what = fmt::format("{}: {}", latest, name);
      checkpoint::load_into(st.master, reader.read(checkpoint::Section::model, name), what);
      if (!has_moments) continue;
      checkpoint::load_into(st.m, reader.read(checkpoint::Section::optimizer, "m/" + name), what);
      checkpoint::load_into(st.v, reader.read(checkpoint::Section::optimizer, "v/" + name), what);
    }
  }

  // Uploads a host batch of ids as an i32 (B*T) tensor on the device.
  Tensor upload(const std::vector<int32_t>& ids) {
    std::vector<int64_t> wide(ids.begin(), ids.end());
    return tensor_from_ints(wide, {int64_t(ids.size())}, DType::i32, device);
  }

  // One optimizer step's forward and backward over this rank's micro-batches; gradients end up
  // summed over the group. Returns the step's loss: the mean over all ranks' micro-batches.
  double forward_backward(int64_t step, std::vector<int32_t>& inputs,
                          std::vector<int32_t>& targets) {
    const auto& t = config.train;
    const int64_t B = t.batch_size, T = config.model.seq_len;
    const float scale = 1.0f / float(global_micro_batches());
    if (pipeline)
      return pipeline->train_step([&](int mb) {
        sampler->seek(position_at(step) + uint64_t(mb));
        sampler->next(inputs, targets);
        return parallel::pipeline::MicroBatch{upload(inputs), upload(targets), B};
      });
    double loss = 0;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      sampler->seek(position_at(step) + uint64_t(dp_rank * t.grad_accum + micro));
      sampler->next(inputs, targets);
      const bool last = micro + 1 == t.grad_accum;
      std::function<void(size_t)> unit_done;
      if (reducer && last) {
        reducer->begin();
        unit_done = [this](size_t unit) { reducer->unit_done(unit); };
      }
      loss += model->forward_backward(upload(inputs), upload(targets), B, T, scale, unit_done);
    }
    if (!reducer) return loss / double(t.grad_accum);
    reducer->finish();
    double total = 0;  // rank order, as one process would add its micro-batches
    for (const auto& sums : parallel::gather_doubles(*group, runtime.cpu(), {loss}))
      total += sums[0];
    return total / double(global_micro_batches());
  }
};

Trainer::Trainer(const config::TrainConfig& config, Runtime& runtime,
                 std::function<void(const std::string&)> print, comm::Communicator* group)
    : state_(std::make_unique<State>(config, runtime, std::move(print), group)) {}

Trainer::~Trainer() = default;

models::Llama& Trainer::model() {
  return *state_->model;
}

double Trainer::evaluate() {
  State& s = *state_;
  if (s.split.val.empty()) return -1;
  const int64_t B = s.config.train.batch_size, T = s.config.model.seq_len;
  data::EvalWindows windows(s.split.val, B, T);
  std::vector<int32_t> inputs(size_t(B * T)), targets(size_t(B * T));
  if (s.pipeline) {
    std::vector<parallel::pipeline::MicroBatch> batches;
    for (int64_t b = 0; b < s.config.train.eval_batches; ++b) {
      const int64_t rows = windows.next(inputs, targets);
      if (rows == 0) break;
      inputs.resize(size_t(rows * T));
      targets.resize(size_t(rows * T));
      batches.push_back({s.upload(inputs), s.upload(targets), rows});
      inputs.resize(size_t(B * T));
      targets.resize(size_t(B * T));
    }
    if (batches.empty()) return -1;
    return s.pipeline->evaluate([&](int mb) { return batches[size_t(mb)]; }, int(batches.size()));
  }
  std::vector<double> losses;  // per batch; batch b is computed by rank b % dp_ranks
  for (int64_t b = 0; b < s.config.train.eval_batches; ++b) {
    int64_t rows = windows.next(inputs, targets);
    if (rows == 0) break;
    losses.push_back(0);
    if (b % s.dp_ranks != s.dp_rank) continue;
    inputs.resize(size_t(rows * T));
    targets.resize(size_t(rows * T));
    losses.back() = s.model->loss(s.upload(inputs), s.upload(targets), rows, T);
    inputs.resize(size_t(B * T));
    targets.resize(size_t(B * T));
  }
  if (losses.empty()) return -1;
  if (s.reducer) {
    const auto all = parallel::gather_doubles(*s.group, s.runtime.cpu(), losses);
    for (size_t b = 0; b < losses.size(); ++b) losses[b] = all[b % size_t(s.dp_ranks)][b];
  }
  double total = 0;
  for (double l : losses) total += l;
  return total / double(losses.size());
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const auto& t = s.config.train;
  const int64_t B = t.batch_size, T = s.config.model.seq_len;
  const double tokens_per_step = double(B * T * s.global_micro_batches());
  const int ranks = s.group != nullptr ? s.group->size() : 1;
  const double peak = s.peak_flops;
  s.print(fmt::format(
      "h2 train: {} parameters on {} ({}){}, {}; {} steps of {} tokens; data {} ({} train / {} "
      "val tokens)",
      s.num_parameters, s.device.str(), s.device.props().name,
      s.reducer    ? fmt::format(" x {} ranks (data parallel, {} gradient bucket{})", ranks,
                                 s.reducer->num_buckets(), s.reducer->num_buckets() == 1 ? "" : "s")
      : s.pipeline ? fmt::format(" x {} ranks (pipeline {}, stages {}, groups of {} ranks)", ranks,
                                 s.config.parallel.schedule, s.pipeline->layout().str(),
                                 s.pipeline->groups_str())
                   : "",
      dtype_name(t.dtype), t.steps, int64_t(tokens_per_step), s.dataset.source(),
      s.split.train.size(), s.split.val.size()));

  TrainSummary summary;
  const bool checkpoints = !s.config.checkpoint.dir.empty();
  const int64_t first_step = State::resuming(s.config) ? s.resume() : 0;
  if (s.pipeline) {  // every action's start and end: bubble, stash peaks, the trace
    s.timeline = std::make_unique<parallel::pipeline::Timeline>(
        *s.pipeline, parallel::pipeline::TimelineOptions{.first_step = first_step + 1});
    s.pipeline->set_observer(s.timeline.get());
    parallel::pipeline::align_clocks(*s.group, s.runtime.cpu(), *s.timeline);
  }
  if (s.model->apply_precision(s.precision, first_step, t.steps) > 0)
    s.print(fmt::format("precision of the block linears: {}", recipe_summary(s.model->linears())));
  std::vector<int32_t> inputs(size_t(B * T)), targets(size_t(B * T));
  auto run_start = Clock::now(), interval_start = run_start;
  int64_t interval_steps = 0;
  for (int64_t step = first_step; step < t.steps; ++step) {
    const int switched = s.model->apply_precision(s.precision, step, t.steps);
    if (switched > 0)
      s.print(fmt::format("step {}: {} linear layers changed precision; now {}", step + 1, switched,
                          recipe_summary(s.model->linears())));
    if (s.sharded)
      s.sharded->zero_grad();
    else
      s.optimizer->zero_grad();
    const double loss = s.forward_backward(step, inputs, targets);
    if (!std::isfinite(loss))
      H2_THROW(Error, "step {}: loss is {} (diverged); lower train.lr or raise warmup_steps",
               step + 1, loss);
    double norm = s.grad_norm();
    double lr = s.schedule.at(step);
    if (s.sharded)
      s.sharded->step(lr, clip_scale(norm, t.grad_clip));
    else
      s.optimizer->step(lr, clip_scale(norm, t.grad_clip));
    ++interval_steps;
    summary.final_loss = loss;

    bool last = step + 1 == t.steps;
    bool evaluate_now = t.eval_every > 0 && ((step + 1) % t.eval_every == 0 || last);
    if ((step + 1) % s.config.log.every == 0 || last || evaluate_now) {
      s.device.default_stream().synchronize();
      auto now = Clock::now();
      double seconds = std::chrono::duration<double>(now - interval_start).count();
      StepMetrics m{.step = step + 1,
                    .total_steps = t.steps,
                    .loss = loss,
                    .lr = lr,
                    .tokens_per_s = tokens_per_step * double(interval_steps) / seconds,
                    .step_ms = 1e3 * seconds / double(interval_steps),
                    .mem_bytes = s.device.allocator().stats().bytes_in_use,
                    .grad_norm = norm};
      m.mfu = peak > 0 ? m.tokens_per_s * s.flops_per_token / peak : 0;
      if (s.timeline) {  // collective: every rank logs the same steps
        const auto stats =
            parallel::pipeline::gather_step_stats(*s.group, s.runtime.cpu(), *s.timeline);
        parallel::pipeline::add_json_fields(stats, m.extra);
        m.extra_progress = parallel::pipeline::progress_fields(stats);
      }
      if (s.precision.any_low_precision()) {
        const PrecisionReport report = precision_report(s.model->linears());
        m.extra["precision"] = report.json;
        m.extra_progress += (m.extra_progress.empty() ? "" : " | ") + report.progress;
      }
      if (evaluate_now) {
        m.eval_loss = evaluate();
        summary.final_eval_loss = *m.eval_loss;
      }
      double elapsed = std::chrono::duration<double>(now - run_start).count();
      double eta = elapsed / double(step + 1 - first_step) * double(t.steps - step - 1);
      s.print(progress_line(m, eta));
      if (s.rank == 0) s.metrics.write_step(m);
      interval_start = Clock::now();  // evaluation time is not training time
      interval_steps = 0;
    }
    int64_t every = s.config.checkpoint.every;
    if (checkpoints && (last || (every > 0 && (step + 1) % every == 0))) {
      s.save(step + 1);
      interval_start = Clock::now();
    }
  }
  if (s.timeline) {
    if (!s.config.log.trace_file.empty()) {
      const std::string trace =
          parallel::pipeline::gather_trace_json(*s.group, s.runtime.cpu(), *s.timeline);
      if (s.rank == 0) {
        parallel::pipeline::write_trace_file(s.config.log.trace_file, trace);
        s.print(fmt::format("trace: {} (chrome://tracing or ui.perfetto.dev)",
                            s.config.log.trace_file));
      }
    }
    s.pipeline->set_observer(nullptr);
  }
  double total = std::chrono::duration<double>(Clock::now() - run_start).count();
  summary.steps = t.steps;
  summary.tokens_per_s = tokens_per_step * double(t.steps - first_step) / total;
  summary.peak_mem_bytes = s.device.allocator().stats().peak_bytes_in_use;
  nlohmann::json done = {{"steps", summary.steps},
                         {"final_loss", summary.final_loss},
                         {"tokens_per_s", summary.tokens_per_s},
                         {"peak_mem_bytes", summary.peak_mem_bytes},
                         {"ranks", ranks},
                         {"seconds", total}};
  if (summary.final_eval_loss >= 0) done["final_eval_loss"] = summary.final_eval_loss;
  if (s.rank == 0) s.metrics.write_done(done);
  return summary;
}

}  // namespace h2::train
