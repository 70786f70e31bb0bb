// The training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "comm/comm_error.h"
#include "core/env.h"
#include "core/error.h"
#include "core/tensor_host.h"
#include "core/version.h"
#include "optim/lr_schedule.h"
#include "parallel/exact_gather.h"
#include "parallel/pipeline/trace_events.h"
#include "parallel/runtime/plan_runtime.h"
#include "train/background_saves.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint_state.h"
#include "train/config/job_plan.h"
#include "train/data/sampler.h"
#include "train/emulation_monitor.h"
#include "train/metrics/metrics_log.h"
#include "train/precision_report.h"
#include "train/start_checks.h"
#include "train/stop_signals.h"

namespace h2::train {
namespace {

using Clock = std::chrono::steady_clock;
using parallel::pipeline::MicroBatch;

}  // namespace

struct Trainer::State {
  const config::TrainConfig& config;
  Runtime& runtime;
  comm::Communicator& job;
  const parallel::Plan plan;
  Device& device;
  const int rank;                                 // in the job; rank 0 prints and writes metrics
  std::function<void(const std::string&)> print;  // no-op on ranks other than 0
  std::unique_ptr<checkpoint::CheckpointDir> outputs;  // rank 0, with checkpoint.dir: locked
  data::TokenDataset dataset;
  std::optional<data::TokenDataset> val_dataset;  // data.val_path, when set
  data::DataSplit split;
  std::unique_ptr<models::Llama> model;
  int64_t num_parameters = 0;
  std::unique_ptr<parallel::PlanRuntime> engine;
  std::unique_ptr<data::WindowSampler> sampler;
  std::unique_ptr<parallel::pipeline::Timeline> timeline;  // during run()
  std::unique_ptr<EmulationMonitor> emulation;             // during run()
  MetricsLog metrics{""};  // opened by run() on rank 0 (a dry run writes nothing)
  optim::LrSchedule schedule;
  double flops_per_token = 0;
  double peak_flops = 0;            // the job's: every rank's device peak added
  std::string peak_source;          // where rank 0's device's peak came from (Device::mfu_peak)
  bool mfu_explained = false;       // an MFU above 100% was explained in the log
  lowp::PrecisionPolicy precision;  // the block linears' GEMM recipes over the run
  // The sampler position (global micro-batches drawn) at the start of step `base_step`.
  int64_t base_step = 0;
  uint64_t base_position = 0;
  std::string resumed_from;  // the checkpoint run() continued from; empty when it started afresh
  // Which launcher job this is (TrainerState::job): its checkpoints carry it, and a restart
  // resumes only from them.
  const std::string job_fingerprint = train::job_fingerprint(env_string("H2_JOB_TOKEN"));
  BackgroundSaves background{job, runtime.cpu()};  // checkpoint.async

  State(const config::TrainConfig& cfg, Runtime& rt, std::function<void(const std::string&)> out,
        comm::Communicator& job_comm, bool dry_run)
      : config(cfg),
        runtime(rt),
        job(job_comm),
        plan(config::plan_from_config(cfg, job_comm.size())),
        device(rt.device(plan.devices.at(size_t(job_comm.rank())))),
        rank(job_comm.rank()),
        print(rank == 0 ? std::move(out) : [](const std::string&) {}),
        outputs(open_outputs(cfg, rank, dry_run, print)),
        dataset(data::TokenDataset::load(cfg.data.path, cfg.data.format)),
        val_dataset(cfg.data.val_path.empty()
                        ? std::nullopt
                        : std::optional(data::TokenDataset::load(cfg.data.val_path, cfg.data.format,
                                                                 "data.val_path"))),
        split(val_dataset ? dataset.split_with(*val_dataset, cfg.model.seq_len)
                          : dataset.split(cfg.data.val_fraction, cfg.model.seq_len)) {
    dataset.check_vocab(cfg.model.vocab_size);
    if (val_dataset) val_dataset->check_vocab(cfg.model.vocab_size);
    if (cfg.parallel.memory_check) config::check_plan_memory(plan, cfg, rank, device);
    models::LlamaConfig llama = llama_config(cfg.model);
    // The units this rank does not run stay on the host: a chip holds only its stages (and a
    // tied table where its head uses it).
    const int head = int(llama.n_layers) + 1;
    auto place = [&](int unit) -> Device* {
      const bool tied_here = unit == 0 && llama.tie_embeddings && plan.holds_unit(rank, head);
      return plan.holds_unit(rank, unit) || tied_here ? &device : &rt.cpu();
    };
    model = std::make_unique<models::Llama>(llama, device,
                                            models::LlamaOptions{.dtype = cfg.train.dtype,
                                                                 .seed = uint64_t(cfg.train.seed),
                                                                 .recompute = plan.recompute,
                                                                 .place = place});
    num_parameters = model->num_parameters();  // before FSDP releases the full values
    precision = config::precision_policy(cfg);
    flops_per_token = training_flops_per_token(llama, num_parameters);
    // Every rank's peak, for MFU: mixed clusters add different chips.
    const Device::Peak own_peak = device.mfu_peak(cfg.train.dtype);
    peak_source = own_peak.source;
    for (const auto& peak : parallel::gather_doubles(job, rt.cpu(), {own_peak.flops}))
      peak_flops += peak[0];
    engine = std::make_unique<parallel::PlanRuntime>(
        plan, *model, job, cfg.model.seq_len,
        optim::AdamwOptions{.weight_decay = cfg.train.weight_decay});
    sampler = std::make_unique<data::WindowSampler>(split.train, cfg.train.batch_size,
                                                    cfg.model.seq_len, uint64_t(cfg.train.seed));
    schedule = {.lr = cfg.train.lr,
                .min_lr = cfg.train.min_lr,
                .warmup_steps = cfg.train.warmup_steps,
                .total_steps = cfg.train.steps};
  }

  // Resume when asked, or when h2run restarted the job after a failure.
  static bool resuming(const config::TrainConfig& cfg) {
    return !cfg.checkpoint.dir.empty() &&
           (cfg.checkpoint.resume || env_int("H2_RESTART", 0, 1L << 30) > 0);
  }

  double tokens_per_step() const {
    return double(config.train.batch_size * config.model.seq_len * plan.global_micro_batches());
  }

  uint64_t position_at(int64_t step) const {
    return base_position + uint64_t((step - base_step) * plan.global_micro_batches());
  }

  // Writes DIR/step_NNNNNN after `steps` optimizer steps (collective): every rank its share.
  std::string save(int64_t steps) {
    const checkpoint::RankContents mine = rank_contents(engine->state().pieces());
    const checkpoint::TrainerState state{
        steps,      position_at(steps), config::dump_yaml(config),
        job.size(), job_fingerprint,    int64_t(split.train.size())};
    const std::string where = checkpoint::save_checkpoint(&job, config.checkpoint.dir, state, mine,
                                                          config.checkpoint.keep_last);
    print(fmt::format("checkpoint: {}", where));
    return where;
  }

  // Starts DIR/step_NNNNNN in the background (checkpoint.async): the state is copied now and
  // written while training goes on (a save still being written is finished first).
  void save_async(int64_t steps) {
    const std::string finished = background.start(
        config.checkpoint.dir,
        checkpoint::TrainerState{steps, position_at(steps), config::dump_yaml(config), job.size(),
                                 job_fingerprint, int64_t(split.train.size())},
        rank_contents(engine->state().pieces()), config.checkpoint.keep_last);
    if (!finished.empty()) print(finished);
  }

  // Completes the background save, if any (collective). `now`: the step just completed.
  void finish_background_save(int64_t now = -1) {
    if (const std::string finished = background.finish(now); !finished.empty()) print(finished);
  }

  // The first stop signal any rank received (0: none): every rank gets the same answer, so the
  // job stops after the same step everywhere. Collective when the job has several ranks.
  int agreed_stop(int local) {
    if (job.size() == 1) return local;
    int agreed = 0;
    for (const auto& rank : parallel::gather_doubles(job, runtime.cpu(), {double(local)}))
      if (agreed == 0 && rank[0] != 0) agreed = int(rank[0]);
    return agreed;
  }

  // Loads, when checkpoint.resume asks, the newest checkpoint in checkpoint.dir (written by any
  // plan); when a launcher restarted the job (H2_RESTART) without it, the newest that this job
  // wrote: another run's checkpoints beside them are not this job's state. Returns the steps it
  // had completed (0: none). A checkpoint without optimizer state (`h2 import`) starts the
  // moments at zero.
  int64_t resume() {
    const bool own_only = !config.checkpoint.resume;
    auto latest = own_only
                      ? checkpoint::latest_checkpoint_of_job(config.checkpoint.dir, job_fingerprint)
                      : checkpoint::latest_checkpoint(config.checkpoint.dir);
    check_ranks_agree(job, runtime.cpu(), latest, config.checkpoint.dir);
    if (!latest) {
      if (own_only)
        print(fmt::format("restart: no checkpoint of this job in {} yet; starting afresh",
                          config.checkpoint.dir));
      return 0;
    }
    const checkpoint::TrainerState saved = checkpoint::read_trainer_state(*latest);
    if (saved.step > config.train.steps)
      H2_THROW(ConfigError,
               "{} is at step {}, past train.steps {} ({}): raise train.steps to train on, or "
               "give the run another checkpoint.dir",
               *latest, saved.step, config.train.steps, config.origin_of("train.steps"));
    CheckpointStateReader reader(*latest);
    engine->state().load(reader, saved.step);
    base_step = saved.step;
    base_position = saved.sampler_position;
    resumed_from = *latest;
    print(fmt::format("resumed from {} (step {}, written by {} rank{})", *latest, saved.step,
                      saved.world_size, saved.world_size == 1 ? "" : "s"));
    if (const std::string warning =
            other_windows_warning(saved, *latest, config, int64_t(split.train.size()));
        !warning.empty())
      print(warning);
    return saved.step;
  }

  // Uploads a host batch of ids as an i32 (B*T) tensor on the device.
  Tensor upload(const std::vector<int32_t>& ids) {
    std::vector<int64_t> wide(ids.begin(), ids.end());
    return tensor_from_ints(wide, {int64_t(ids.size())}, DType::i32, device);
  }

  // One optimizer step's forward and backward over the step's global micro-batches; returns
  // their mean loss with the gradients final on every rank.
  double forward_backward(int64_t step, std::vector<int32_t>& inputs,
                          std::vector<int32_t>& targets) {
    return engine->train_step([&](int index) {
      sampler->seek(position_at(step) + uint64_t(index));
      sampler->next(inputs, targets);
      return MicroBatch{upload(inputs), upload(targets), config.train.batch_size};
    });
  }

  // The metrics of a logged step; collective (the pipeline figures gather every rank's timeline).
  StepMetrics step_metrics(int64_t step, double loss, double lr, double norm, double seconds,
                           int64_t steps) {
    const double tokens = double(config.train.batch_size * config.model.seq_len) *
                          double(plan.global_micro_batches()) * double(steps);
    StepMetrics m{.step = step + 1,
                  .total_steps = config.train.steps,
                  .loss = loss,
                  .lr = lr,
                  .tokens_per_s = tokens / seconds,
                  .step_ms = 1e3 * seconds / double(steps),
                  .mem_bytes = device.allocator().stats().bytes_in_use,
                  .grad_norm = norm};
    m.mfu = peak_flops > 0 ? m.tokens_per_s * flops_per_token / peak_flops : 0;
    if (m.mfu > 1 && !mfu_explained) {  // a figure that cannot be: say why, once
      print(fmt::format(
          "warning: mfu {:.0f}% is above 100%: the job's peak it divides by ({:.1f} GFLOP/s, every "
          "rank's device added; rank 0's: {}) is below the speed reached; virtual chips run "
          "unpaced (H2_VCHIP_TIME_SCALE=0) or H2_CPU_PEAK_GFLOPS is set too low",
          100 * m.mfu, peak_flops / 1e9, peak_source));
      mfu_explained = true;
    }
    const auto stats = parallel::pipeline::gather_step_stats(job, runtime.cpu(), *timeline);
    parallel::pipeline::add_json_fields(stats, m.extra);
    if (plan.stages() > 1) m.extra_progress = parallel::pipeline::progress_fields(stats);
    // What the plan predicted, beside what this interval measured.
    if (config.prediction) {
      m.extra["predicted_step_ms"] = config.prediction->step_ms;
      m.extra["predicted_busy_ms"] = config.prediction->busy_ms;
      m.extra_progress +=
          fmt::format("{}predicted {:.0f} ms/step", m.extra_progress.empty() ? "" : " | ",
                      config.prediction->step_ms);
    }
    // Honest emulation: how far the hosts overran their emulated chips and links.
    if (const EmulationMonitor::Shares shares = emulation->interval_shares();
        !shares.total.empty()) {
      m.extra["emulation_overrun"] = shares.total[shares.worst_rank()];
      m.extra["emulation_overrun_per_rank"] = shares.total;
      m.extra["emulation_overrun_kernels_per_rank"] = shares.kernels;
      m.extra["emulation_overrun_links_per_rank"] = shares.links;
      if (const std::string warning = overrun_warning(shares); !warning.empty())
        m.extra_progress += (m.extra_progress.empty() ? "" : " | ") + warning;
    }
    if (precision.any_low_precision()) {
      const PrecisionReport report = precision_report(model->linears());
      m.extra["precision"] = report.json;
      m.extra_progress += (m.extra_progress.empty() ? "" : " | ") + report.progress;
    }
    return m;
  }
};

Trainer::Trainer(const config::TrainConfig& config, Runtime& runtime,
                 std::function<void(const std::string&)> print, comm::Communicator& job,
                 bool dry_run)
    : state_(std::make_unique<State>(config, runtime, std::move(print), job, dry_run)) {}

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
  std::vector<MicroBatch> batches;
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
  return s.engine->evaluate([&](int b) { return batches[size_t(b)]; }, int(batches.size()));
}

std::string Trainer::describe() const {
  const State& s = *state_;
  const auto& t = s.config.train;
  return fmt::format(
      "h2 train: {} parameters on {} ({}){}, {}; {}; {} steps of {} tokens; data {} ({} train / {} "
      "val tokens)",
      s.num_parameters, s.device.str(), s.device.props().name,
      s.job.size() > 1 ? fmt::format(" x {} ranks", s.job.size()) : "", dtype_name(t.dtype),
      s.plan.str(), t.steps, int64_t(s.tokens_per_step()), s.dataset.source(), s.split.train.size(),
      s.split.val.size());
}

TrainSummary Trainer::run(const std::function<int()>& stop_requested) {
  State& s = *state_;
  const auto& t = s.config.train;
  s.print(describe());
  if (const std::string warning = long_warmup_warning(s.config); !warning.empty()) s.print(warning);
  s.print(fmt::format("mfu divides by {:.1f} GFLOP/s: {}{}", s.peak_flops / 1e9, s.peak_source,
                      s.job.size() > 1 ? "; every rank's device added" : ""));

  TrainSummary summary;
  const bool checkpoints = !s.config.checkpoint.dir.empty();
  const int64_t first_step = State::resuming(s.config) ? s.resume() : 0;
  if (checkpoints && !State::resuming(s.config) && s.rank == 0)
    if (const std::string warning = earlier_checkpoints_warning(s.config); !warning.empty())
      s.print(warning);
  summary.first_step = summary.steps = first_step;
  if (first_step == t.steps) {  // a finished run started again (a requeued job): nothing to do
    s.print(fmt::format("nothing to train: {} is at train.steps ({})", s.resumed_from, t.steps));
    return summary;
  }
  if (s.rank == 0) {
    s.metrics = MetricsLog(s.config.log.metrics_file, State::resuming(s.config));
    s.metrics.write_event("start", first_step,
                          {{"config", nlohmann::json::parse(config::dump_json(s.config))},
                           {"version", version_text("h2")},
                           {"ranks", s.job.size()},
                           {"plan", s.plan.str()},
                           {"peak_flops", s.peak_flops},
                           {"peak_source", s.peak_source}});
    if (!s.resumed_from.empty())
      s.metrics.write_event("resume", first_step, {{"checkpoint", s.resumed_from}});
  }
  // Every action's start and end: bubble, stash peaks, the trace.
  s.timeline = std::make_unique<parallel::pipeline::Timeline>(
      s.engine->executor(), parallel::pipeline::TimelineOptions{.first_step = first_step + 1});
  s.engine->executor().set_observer(s.timeline.get());
  parallel::pipeline::align_clocks(s.job, s.runtime.cpu(), *s.timeline);
  s.emulation = std::make_unique<EmulationMonitor>(s.device, s.job, s.runtime.cpu());
  // The first background save's memory, prepared meanwhile when there will be one.
  if (checkpoints && s.config.checkpoint.async &&
      BackgroundSaves::will_save(first_step, t.steps, s.config.checkpoint.every))
    s.background.prepare(rank_contents(s.engine->state().pieces()));
  if (s.model->apply_precision(s.precision, first_step, t.steps) > 0)
    s.print(fmt::format("precision of the block linears: {}", recipe_summary(s.model->linears())));
  std::vector<int32_t> inputs(size_t(t.batch_size * s.config.model.seq_len)),
      targets(inputs.size());
  auto run_start = Clock::now(), interval_start = run_start;
  int64_t interval_steps = 0, step = first_step;
  try {
    for (; step < t.steps; ++step) {
      const int switched = s.model->apply_precision(s.precision, step, t.steps);
      if (switched > 0)
        s.print(fmt::format("step {}: {} linear layers changed precision; now {}", step + 1,
                            switched, recipe_summary(s.model->linears())));
      s.engine->state().zero_grad();
      const double loss = s.forward_backward(step, inputs, targets);
      if (!std::isfinite(loss))
        H2_THROW(Error, "step {}: loss is {} (diverged); lower train.lr or raise warmup_steps",
                 step + 1, loss);
      const double norm = s.engine->state().grad_norm();
      const double lr = s.schedule.at(step);
      s.engine->state().step(lr, optim::clip_scale(norm, t.grad_clip));
      ++interval_steps;
      summary.final_loss = loss;
      if (stop_requested) summary.stopped_by = s.agreed_stop(stop_requested());

      const bool last = step + 1 == t.steps || summary.stopped_by != 0;
      const bool evaluate_now =
          t.eval_every > 0 && summary.stopped_by == 0 && ((step + 1) % t.eval_every == 0 || last);
      if ((step + 1) % s.config.log.every == 0 || last || evaluate_now) {
        s.device.default_stream().synchronize();
        const auto now = Clock::now();
        const double seconds = std::chrono::duration<double>(now - interval_start).count();
        StepMetrics m = s.step_metrics(step, loss, lr, norm, seconds, interval_steps);
        if (evaluate_now) {
          m.eval_loss = evaluate();
          summary.final_eval_loss = *m.eval_loss;
        }
        const double elapsed = std::chrono::duration<double>(now - run_start).count();
        const double eta = elapsed / double(step + 1 - first_step) * double(t.steps - step - 1);
        s.print(progress_line(m, eta));
        if (s.rank == 0) {
          s.metrics.write_step(m);
          if (m.eval_loss) s.metrics.write_event("eval", m.step, {{"eval_loss", *m.eval_loss}});
        }
        interval_start = Clock::now();  // evaluation time is not training time
        interval_steps = 0;
      }
      const int64_t every = s.config.checkpoint.every;
      if (checkpoints && (last || (every > 0 && (step + 1) % every == 0))) {
        if (s.config.checkpoint.async && !last) {
          s.save_async(step + 1);  // the copy counts as training time, the write overlaps it
        } else {                   // the last checkpoint is written before the run ends
          s.finish_background_save();
          const std::string where = s.save(step + 1);
          if (summary.stopped_by != 0) summary.checkpoint = where;
          interval_start = Clock::now();
        }
      } else if (s.background.pending() && s.background.pending_written()) {
        s.finish_background_save(step + 1);
      }
      if (summary.stopped_by != 0) {
        ++step;
        break;
      }
    }
  } catch (const comm::CommError& e) {
    // The communication layer counts collectives, not steps: name the step the job was at.
    throw comm::CommError(fmt::format("step {}: {}", step + 1, e.what()), e.raised_at());
  }
  if (!s.config.log.trace_file.empty()) {
    const std::string trace =
        parallel::pipeline::gather_trace_json(s.job, s.runtime.cpu(), *s.timeline);
    if (s.rank == 0) {
      parallel::pipeline::write_trace_file(s.config.log.trace_file, trace);
      s.print(
          fmt::format("trace: {} (chrome://tracing or ui.perfetto.dev)", s.config.log.trace_file));
    }
  }
  s.engine->executor().set_observer(nullptr);
  const double total = std::chrono::duration<double>(Clock::now() - run_start).count();
  summary.steps = step;
  summary.tokens_per_s = s.tokens_per_step() * double(step - first_step) / total;
  summary.peak_mem_bytes = s.device.allocator().stats().peak_bytes_in_use;
  std::vector<double> peaks;  // every rank's, MiB
  for (const auto& p : parallel::gather_doubles(s.job, s.runtime.cpu(),
                                                {double(summary.peak_mem_bytes) / (1 << 20)}))
    peaks.push_back(p[0]);
  if (summary.stopped_by != 0) {
    s.print(fmt::format(
        "stopped by {} after step {}{}", stop_signal_name(summary.stopped_by), step,
        summary.checkpoint.empty()
            ? " (no checkpoint.dir: nothing was saved)"
            : fmt::format("; resume with checkpoint.resume: true ({})", summary.checkpoint)));
    if (s.rank == 0)
      s.metrics.write_event("stop", step,
                            {{"signal", stop_signal_name(summary.stopped_by)},
                             {"checkpoint", summary.checkpoint},
                             {"final_loss", summary.final_loss}});
    return summary;
  }
  nlohmann::json done = {{"steps", summary.steps},
                         {"peak_mem_mib_per_rank", peaks},
                         {"final_loss", summary.final_loss},
                         {"tokens_per_s", summary.tokens_per_s},
                         {"peak_mem_bytes", summary.peak_mem_bytes},
                         {"ranks", s.job.size()},
                         {"seconds", total}};
  if (summary.final_eval_loss >= 0) done["final_eval_loss"] = summary.final_eval_loss;
  if (s.config.prediction) {
    done["predicted_step_ms"] = s.config.prediction->step_ms;
    done["predicted_peak_mib"] = s.config.prediction->peak_mib;
  }
  if (s.rank == 0) s.metrics.write_event("done", summary.steps, done);
  return summary;
}

}  // namespace h2::train
