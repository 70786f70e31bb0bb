// The training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/tensor_host.h"
#include "train/checkpoint/checkpoint.h"
#include "train/data/sampler.h"
#include "train/optim/adamw.h"
#include "train/optim/lr_schedule.h"

namespace h2::train {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<ParamRef> param_refs(models::Llama& model) {
  std::vector<ParamRef> refs;
  for (auto& p : model.named_parameters()) refs.push_back({p.name, p.param, p.grad});
  return refs;
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
  std::function<void(const std::string&)> print;
  data::TokenDataset dataset;
  data::DataSplit split;
  std::unique_ptr<models::Llama> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<data::WindowSampler> sampler;
  MetricsLog metrics;
  LrSchedule schedule;
  double flops_per_token = 0;

  State(const config::TrainConfig& cfg, Runtime& rt, std::function<void(const std::string&)> out)
      : config(cfg),
        runtime(rt),
        device(rt.device(cfg.train.device)),
        print(std::move(out)),
        dataset(data::TokenDataset::load(cfg.data.path, data::parse_data_format(cfg.data.format))),
        split(dataset.split(cfg.data.val_fraction, cfg.model.seq_len)),
        metrics(cfg.log.metrics_file, cfg.checkpoint.resume) {
    dataset.check_vocab(cfg.model.vocab_size);
    models::LlamaConfig llama = llama_config(cfg.model);
    model = std::make_unique<models::Llama>(
        llama, device,
        models::LlamaOptions{.dtype = cfg.train.dtype, .seed = uint64_t(cfg.train.seed)});
    optimizer = std::make_unique<AdamW>(param_refs(*model),
                                        AdamwOptions{.weight_decay = cfg.train.weight_decay});
    sampler = std::make_unique<data::WindowSampler>(split.train, cfg.train.batch_size,
                                                    cfg.model.seq_len, uint64_t(cfg.train.seed));
    schedule = {.lr = cfg.train.lr,
                .min_lr = cfg.train.min_lr,
                .warmup_steps = cfg.train.warmup_steps,
                .total_steps = cfg.train.steps};
    flops_per_token = training_flops_per_token(llama, model->num_parameters());
  }

  // Writes DIR/step_NNNNNN after `steps` optimizer steps.
  void save(int64_t steps) {
    checkpoint::TensorMap model_tensors, optimizer_tensors;
    const auto& params = optimizer->params();
    for (size_t i = 0; i < params.size(); ++i) {
      const AdamW::State& st = optimizer->state()[i];
      model_tensors[params[i].name] = checkpoint::store(st.master);
      optimizer_tensors["m/" + params[i].name] = checkpoint::store(st.m);
      optimizer_tensors["v/" + params[i].name] = checkpoint::store(st.v);
    }
    std::string where = checkpoint::save_checkpoint(
        config.checkpoint.dir, {steps, sampler->position(), config::dump_yaml(config)},
        model_tensors, optimizer_tensors, config.checkpoint.keep_last);
    print(fmt::format("checkpoint: {}", where));
  }

  // Loads the newest checkpoint in checkpoint.dir; returns the steps it had completed (0: none).
  int64_t resume() {
    auto latest = checkpoint::latest_checkpoint(config.checkpoint.dir);
    if (!latest) return 0;
    checkpoint::TrainerState saved = checkpoint::read_trainer_state(*latest);
    std::string model_file = *latest + "/model.safetensors";
    std::string optimizer_file = *latest + "/optimizer.safetensors";
    checkpoint::TensorMap model_tensors = checkpoint::read_safetensors(model_file);
    checkpoint::TensorMap optimizer_tensors = checkpoint::read_safetensors(optimizer_file);
    const auto& params = optimizer->params();
    auto find = [](checkpoint::TensorMap& map, const std::string& name,
                   const std::string& file) -> const checkpoint::StoredTensor& {
      auto it = map.find(name);
      if (it == map.end())
        H2_THROW(ConfigError, "{}: no tensor '{}' (a checkpoint of another model?)", file, name);
      return it->second;
    };
    for (size_t i = 0; i < params.size(); ++i) {
      AdamW::State& st = optimizer->state()[i];
      const std::string& name = params[i].name;
      checkpoint::load_into(st.master, find(model_tensors, name, model_file),
                            model_file + ": " + name);
      checkpoint::load_into(st.m, find(optimizer_tensors, "m/" + name, optimizer_file),
                            optimizer_file);
      checkpoint::load_into(st.v, find(optimizer_tensors, "v/" + name, optimizer_file),
                            optimizer_file);
    }
    optimizer->sync_params_from_masters();
    optimizer->restore_steps(saved.step);
    sampler->seek(saved.sampler_position);
    print(fmt::format("resumed from {} (step {})", *latest, saved.step));
    return saved.step;
  }

  // Uploads a host batch of ids as an i32 (B*T) tensor on the device.
  Tensor upload(const std::vector<int32_t>& ids) {
    std::vector<int64_t> wide(ids.begin(), ids.end());
    return tensor_from_ints(wide, {int64_t(ids.size())}, DType::i32, device);
  }
};

Trainer::Trainer(const config::TrainConfig& config, Runtime& runtime,
                 std::function<void(const std::string&)> print)
    : state_(std::make_unique<State>(config, runtime, std::move(print))) {}

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
  double total = 0;
  int64_t batches = 0;
  for (; batches < s.config.train.eval_batches; ++batches) {
    int64_t rows = windows.next(inputs, targets);
    if (rows == 0) break;
    inputs.resize(size_t(rows * T));
    targets.resize(size_t(rows * T));
    total += s.model->loss(s.upload(inputs), s.upload(targets), rows, T);
    inputs.resize(size_t(B * T));
    targets.resize(size_t(B * T));
  }
  return batches > 0 ? total / double(batches) : -1;
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const auto& t = s.config.train;
  const int64_t B = t.batch_size, T = s.config.model.seq_len;
  const double tokens_per_step = double(B * T * t.grad_accum);
  const double peak = s.device.props().peak(t.dtype);
  s.print(
      fmt::format("h2 train: {} parameters on {} ({}), {}; {} steps of {} tokens; data {} "
                  "({} train / {} val tokens)",
                  s.model->num_parameters(), s.device.str(), s.device.props().name,
                  dtype_name(t.dtype), t.steps, int64_t(tokens_per_step), s.dataset.source(),
                  s.split.train.size(), s.split.val.size()));

  TrainSummary summary;
  const bool checkpoints = !s.config.checkpoint.dir.empty();
  const int64_t first_step = checkpoints && s.config.checkpoint.resume ? s.resume() : 0;
  std::vector<int32_t> inputs(size_t(B * T)), targets(size_t(B * T));
  auto run_start = Clock::now(), interval_start = run_start;
  int64_t interval_steps = 0;
  for (int64_t step = first_step; step < t.steps; ++step) {
    s.optimizer->zero_grad();
    double loss = 0;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      s.sampler->next(inputs, targets);
      loss += s.model->forward_backward(s.upload(inputs), s.upload(targets), B, T,
                                        1.0f / float(t.grad_accum));
    }
    loss /= double(t.grad_accum);
    if (!std::isfinite(loss))
      H2_THROW(Error, "step {}: loss is {} (diverged); lower train.lr or raise warmup_steps",
               step + 1, loss);
    double norm = s.optimizer->grad_norm();
    double lr = s.schedule.at(step);
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
      if (evaluate_now) {
        m.eval_loss = evaluate();
        summary.final_eval_loss = *m.eval_loss;
      }
      double elapsed = std::chrono::duration<double>(now - run_start).count();
      double eta = elapsed / double(step + 1 - first_step) * double(t.steps - step - 1);
      s.print(progress_line(m, eta));
      s.metrics.write_step(m);
      interval_start = Clock::now();  // evaluation time is not training time
      interval_steps = 0;
    }
    int64_t every = s.config.checkpoint.every;
    if (checkpoints && (last || (every > 0 && (step + 1) % every == 0))) {
      s.save(step + 1);
      interval_start = Clock::now();
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - run_start).count();
  summary.steps = t.steps;
  summary.tokens_per_s = tokens_per_step * double(t.steps - first_step) / total;
  summary.peak_mem_bytes = s.device.allocator().stats().peak_bytes_in_use;
  nlohmann::json done = {{"steps", summary.steps},
                         {"final_loss", summary.final_loss},
                         {"tokens_per_s", summary.tokens_per_s},
                         {"peak_mem_bytes", summary.peak_mem_bytes},
                         {"seconds", total}};
  if (summary.final_eval_loss >= 0) done["final_eval_loss"] = summary.final_eval_loss;
  s.metrics.write_done(done);
  return summary;
}

}  // namespace h2::train
