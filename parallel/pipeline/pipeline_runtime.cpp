// The pipeline runtime (see pipeline_runtime.h).
#include "parallel/pipeline/pipeline_runtime.h"

#include <fmt/format.h>

#include <chrono>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"
#include "core/runtime.h"
#include "nn/loss.h"
#include "parallel/exact_gather.h"

namespace h2::parallel::pipeline {
namespace {

// Removes and returns the tensor under `key` (a stage and micro-batch).
template <class Key>
Tensor take(std::map<Key, Tensor>& box, const Key& key) {
  auto it = box.find(key);
  H2_CHECK(it != box.end(), "stage {} micro-batch {}: nothing to send (schedule order broken)",
           key.stage, key.microbatch);
  Tensor t = std::move(it->second);
  box.erase(it);
  return t;
}

// Whether the first compute of actions[i]'s stage after position i is a backward (B, I or W).
bool next_compute_is_backward(const std::vector<Action>& actions, size_t i) {
  for (size_t j = i + 1; j < actions.size(); ++j)
    if (actions[j].stage == actions[i].stage && is_compute(actions[j].kind))
      return actions[j].kind != ActionKind::F;
  return false;
}

}  // namespace

PipelineRuntime::PipelineRuntime(nn::Model& model, StageLayout layout, Schedule schedule,
                                 comm::Communicator& replica, PipelineOptions options)
    : model_(model),
      units_(model.units()),
      tied_(model.tied_parameter()),
      layout_(std::move(layout)),
      schedule_(std::move(schedule)),
      job_(replica),
      seq_len_(options.seq_len),
      loss_micro_batches_(options.loss_micro_batches > 0 ? options.loss_micro_batches
                                                         : schedule_.microbatches),
      wire_dtype_(options.wire_dtype),
      overlap_(options.overlap),
      segment_bytes_(options.segment_bytes) {
  schedule_.check_shape();
  std::vector<int> group_sizes = std::move(options.group_sizes);
  const bool fsdp = options.fsdp;
  if (group_sizes.empty()) group_sizes.assign(size_t(schedule_.ranks), 1);
  const int total = std::accumulate(group_sizes.begin(), group_sizes.end(), 0);
  if (int(group_sizes.size()) != schedule_.ranks || total != job_.size())
    H2_THROW(ConfigError,
             "stage groups of [{}] ranks: a schedule of {} positions on a replica of {} ranks "
             "needs {} groups summing to {}",
             fmt::join(group_sizes, ", "), schedule_.ranks, job_.size(), schedule_.ranks,
             job_.size());
  H2_CHECK(schedule_.stages == layout_.stages(), "a schedule of {} stages for a layout of {}",
           schedule_.stages, layout_.stages());
  H2_CHECK(layout_.first.back() == int(units_.size()),
           "the layout covers {} units; the model has {}", layout_.first.back(), units_.size());
  int next = 0;
  for (int q = 0; q < schedule_.ranks; ++q) {
    groups_.emplace_back();
    for (int k = 0; k < group_sizes[size_t(q)]; ++k, ++next) {
      if (next == job_.rank()) {
        position_ = q;
        group_rank_ = k;
      }
      groups_.back().push_back(next);
    }
  }
  const bool grouped =
      std::any_of(group_sizes.begin(), group_sizes.end(), [](int g) { return g > 1; });
  if (grouped || fsdp) group_ = job_.split(position_, group_rank_);
  const int first = position_of(0), last = position_of(schedule_.stages - 1);
  if (tied_ != nullptr && first != last) {
    if (grouped || fsdp)
      H2_THROW(ConfigError,
               "tied embeddings need one rank per pipeline stage group and no FSDP (groups "
               "[{}]); set model.tie_embeddings: false",
               fmt::join(group_sizes, ", "));
    tied_pair_ = job_.split(position_ == first || position_ == last ? 0 : -1, job_.rank());
  }
  if (fsdp)  // every rank of a group builds the same units' groups, in the same order
    for (int s = 0; s < schedule_.stages; ++s)
      if (here(s))
        for (int u = layout_.begin(s); u < layout_.end(s); ++u)
          flats_[u] = std::make_unique<fsdp::FlatParamGroup>(*group_, *units_[size_t(u)]);
  for (const Action& a : schedule_.per_rank.at(size_t(position_)))
    if (a.kind == ActionKind::B || a.kind == ActionKind::W) last_backward_[a.stage] = a;
  if (options.progress_thread_us > 0)
    progress_ = std::make_unique<ProgressThread>(
        std::chrono::microseconds(options.progress_thread_us), [this] {
          job_.progress();
          if (group_) group_->progress();
          if (tied_pair_) tied_pair_->progress();
        });
}

template <class Compute>
void PipelineRuntime::compute_unit(int unit, const Compute& compute) {
  await_gather(unit);
  if (!progress_) return compute();
  progress_->resume();
  struct Pause {
    ProgressThread& thread;
    ~Pause() { thread.pause(); }
  } pause{*progress_};
  compute();
}

std::vector<std::vector<Tensor>> PipelineRuntime::gradients_per_unit() const {
  std::vector<std::vector<Tensor>> grads(units_.size());
  for (int u = 0; u < int(units_.size()); ++u) {
    if (!owns_unit(u)) continue;
    if (auto it = flats_.find(u); it != flats_.end()) {
      grads[size_t(u)].push_back(it->second->grad_shard());
      continue;
    }
    for (nn::Param* p : nn::params_of(*units_[size_t(u)])) grads[size_t(u)].push_back(p->grad);
  }
  return grads;
}

void PipelineRuntime::unit_gradients_final(int unit) {
  if (!reduces_in_group())
    report_final(unit, unit + 1);  // replicas reduce it while the next units run backward
  else if (overlap_)
    begin_reduce(unit);  // the group reduces it while the next units run backward
}

void PipelineRuntime::report_final(int begin_unit, int end_unit) {
  if (!gradients_final_) return;
  for (int u = end_unit - 1; u >= begin_unit; --u) gradients_final_(u);
}

std::vector<fsdp::FlatParamGroup*> PipelineRuntime::flat_groups() const {
  std::vector<fsdp::FlatParamGroup*> groups;
  for (const auto& [unit, flat] : flats_) groups.push_back(flat.get());
  return groups;
}

void PipelineRuntime::settle_sends() {
  if (overlap_ || sends_.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  wait_sends();
  report_comm_wait(start);
}

void PipelineRuntime::report_comm_wait(std::chrono::steady_clock::time_point start) {
  if (lane_)
    lane_->comm_waited(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
}

PipelineRuntime::~PipelineRuntime() = default;

std::string PipelineRuntime::groups_str() const {
  std::vector<size_t> sizes;
  for (const auto& g : groups_) sizes.push_back(g.size());
  return fmt::format("{}", fmt::join(sizes, "+"));
}

std::map<int, int> PipelineRuntime::stashed_per_stage() const {
  std::map<int, int> counts;
  for (const auto& [key, stash] : stashes_) ++counts[key.stage];
  return counts;
}

bool PipelineRuntime::owns_unit(int unit) const {
  return here(layout_.stage_of_unit(unit));
}

std::vector<nn::Param*> PipelineRuntime::owned_parameters() {
  std::vector<nn::Param*> owned;
  const int head = int(units_.size()) - 1;
  for (int u = 0; u < int(units_.size()); ++u)
    for (nn::Param* p : nn::params_of(*units_[size_t(u)]))
      if (owns_unit(u) || (p == tied_ && owns_unit(head))) owned.push_back(p);
  return owned;
}

std::vector<nn::Unit*> PipelineRuntime::whole_weight_units() const {
  std::vector<nn::Unit*> units;
  for (int u = 0; u < int(units_.size()); ++u)
    if (owns_unit(u) && !flats_.contains(u)) units.push_back(units_[size_t(u)]);
  return units;
}

bool PipelineRuntime::counts_in_norm(const std::string& name) const {
  if (group_rank_ != 0) return false;
  return tied_ == nullptr || name != tied_->name || owns_unit(0);
}

void PipelineRuntime::forward(int stage, int mb, bool training) {
  const MicroBatch& batch = batches_.at(size_t(mb));
  const auto [begin, end] = rows_of(position_, group_rank_, mb);
  const int64_t rows = end - begin;
  Tensor x = stage == 0 ? batch.ids.view({batch.rows, seq_len_}).slice(0, begin, end)
                        : take_incoming(inputs_, {stage, mb}, "input activation");
  if (training && observer_) observer_->action_ready(Action::compute(ActionKind::F, stage, mb));
  settle_sends();
  std::vector<nn::Stash> stashes;
  for (int u = layout_.begin(stage); u < layout_.end(stage); ++u) {
    compute_unit(u, [&] { x = units_[size_t(u)]->forward(x); });
    poll_group_transfers(stage);
    if (training)
      stashes.push_back(units_[size_t(u)]->take_stash());
    else
      units_[size_t(u)]->clear();
  }
  if (training) stashes_[{stage, mb}] = std::move(stashes);
  if (stage + 1 < schedule_.stages) {
    if (here(stage + 1))
      inputs_[{stage + 1, mb}] = {x, {}};  // the next stage is here: hand it over
    else
      outputs_[{stage, mb}] = x;
    return;
  }
  const int64_t V = model_.vocab_size();
  Tensor logits = x.view({rows * seq_len_, V});
  Tensor targets = batch.targets.view({batch.rows, seq_len_}).slice(0, begin, end);
  targets = targets.view({rows * seq_len_});
  // This rank's rows are rows / M of the micro-batch: its mean loss counts that much.
  const bool whole = rows == batch.rows;
  const double share = double(rows) / double(batch.rows);
  const float m = float(loss_micro_batches_);
  Tensor dlogits;
  if (training) dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  const float scale = !training ? 1.0f : whole ? 1.0f / m : float(share / double(m));
  const nn::LossSum l = nn::cross_entropy_loss(logits, targets, dlogits, scale);
  const double mean = l.count > 0 ? double(float(l.sum / double(l.count))) : 0.0;
  losses_.at(size_t(mb)) = whole ? mean : share * mean;
  if (training) out_grads_[{stage, mb}] = {dlogits.view({rows, seq_len_, V}), {}};
}

void PipelineRuntime::backward(ActionKind kind, int stage, int mb) {
  Tensor grad = take_incoming(out_grads_, {stage, mb}, "output gradient");
  if (observer_) observer_->action_ready(Action::compute(kind, stage, mb));
  settle_sends();
  auto stash = stashes_.find({stage, mb});
  H2_CHECK(stash != stashes_.end(), "stage {} micro-batch {}: backward before forward", stage, mb);
  const bool split = kind == ActionKind::I;  // weight gradients wait for this micro-batch's W
  const bool last = last_backward_.at(stage) == Action::compute(kind, stage, mb);
  for (int u = layout_.end(stage) - 1; u >= layout_.begin(stage); --u) {
    units_[size_t(u)]->put_stash(std::move(stash->second[size_t(u - layout_.begin(stage))]));
    units_[size_t(u)]->set_defer_weight_grads(split);
    compute_unit(u, [&] { grad = units_[size_t(u)]->backward(grad); });
    units_[size_t(u)]->set_defer_weight_grads(false);
    if (last) unit_gradients_final(u);
    poll_group_transfers(stage);
  }
  if (split) deferred_weight_grads_[stage].push_back(mb);
  stashes_.erase(stash);
  if (stage == 0) return;
  if (here(stage - 1))
    out_grads_[{stage - 1, mb}] = {grad, {}};
  else
    in_grads_[{stage, mb}] = grad;
}

void PipelineRuntime::weight_backward(int stage, int mb) {
  auto& order = deferred_weight_grads_[stage];
  H2_CHECK(!order.empty() && order.front() == mb,
           "stage {}: W of micro-batch {} but the oldest deferred weight gradient is {} (ZB "
           "schedules run each stage's W in the order of its I)",
           stage, mb, order.empty() ? std::string("none") : std::to_string(order.front()));
  order.pop_front();
  settle_sends();
  const bool last = last_backward_.at(stage) == Action::compute(ActionKind::W, stage, mb);
  for (int u = layout_.end(stage) - 1; u >= layout_.begin(stage); --u) {
    compute_unit(u, [&] { units_[size_t(u)]->weight_backward(); });
    if (last) unit_gradients_final(u);
    poll_group_transfers(stage);
  }
}

std::vector<double> PipelineRuntime::run(const std::vector<Action>& actions,
                                         const MicroBatchSource& source, int microbatches,
                                         bool training) {
  // The weights do not change during a step or an evaluation (the optimizer steps after it), so
  // the units may keep their quantized weights across micro-batches. Not FSDP units: that would
  // keep a whole quantized copy of every sharded unit for the step, against what sharding saves.
  nn::FrozenWeights frozen(whole_weight_units());
  batches_.clear();
  for (int mb = 0; mb < microbatches; ++mb) batches_.push_back(source(mb));
  losses_.assign(size_t(microbatches), 0.0);
  ActionObserver* observer = training ? observer_ : nullptr;
  lane_ = observer;
  if (observer) observer->step_started();
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (observer) observer->action_started(a);
    switch (a.kind) {
      case ActionKind::F:
        forward(a.stage, a.microbatch, training);
        break;
      case ActionKind::B:
      case ActionKind::I:
        backward(a.kind, a.stage, a.microbatch);
        break;
      case ActionKind::W:
        weight_backward(a.stage, a.microbatch);
        break;
      case ActionKind::SEND_F:
        post_sends(take(outputs_, {a.stage, a.microbatch}), a.stage, a.peer, a.microbatch, false);
        break;
      case ActionKind::SEND_B:
        post_sends(take(in_grads_, {a.stage, a.microbatch}), a.stage, a.peer, a.microbatch, true);
        break;
      case ActionKind::RECV_F:
        post_receives(inputs_, a.stage, a.peer, a.microbatch, false);
        break;
      case ActionKind::RECV_B:
        post_receives(out_grads_, a.stage, a.peer, a.microbatch, true);
        break;
      case ActionKind::REDUCE_GRAD:
        reduce_grads(a.stage);
        break;
      case ActionKind::UNSHARD:
        if (overlap_ && training)
          begin_gathers(a.stage, next_compute_is_backward(actions, i));
        else
          unshard(a.stage, true);
        break;
      case ActionKind::RESHARD:
        unshard(a.stage, false);
        break;
    }
    if (!sends_.empty()) reap_sends();
    if (observer) observer->action_finished(a);
  }
  wait_sends();
  if (observer) observer->step_finished();
  lane_ = nullptr;
  outputs_.clear();
  in_grads_.clear();
  size_t deferred = 0;
  for (const auto& [stage, order] : deferred_weight_grads_) deferred += order.size();
  H2_CHECK(inputs_.empty() && out_grads_.empty() && stashes_.empty() && deferred == 0,
           "rank {}: the step ended with {} inputs, {} gradients, {} stashes and {} deferred "
           "weight gradients unused",
           job_.rank(), inputs_.size(), out_grads_.size(), stashes_.size(), deferred);
  // Each micro-batch's loss: the last group's row shares added in rank order.
  if (job_.size() == 1) return losses_;
  const auto all = gather_doubles(job_, model_.device().runtime().cpu(), losses_);
  const std::vector<int>& last = groups_[size_t(position_of(schedule_.stages - 1))];
  std::vector<double> losses(size_t(microbatches), 0.0);
  for (int mb = 0; mb < microbatches; ++mb)
    for (int rank : last) losses[size_t(mb)] += all[size_t(rank)][size_t(mb)];
  return losses;
}

std::vector<double> PipelineRuntime::train_step(const MicroBatchSource& source) {
  std::vector<double> losses =
      run(schedule_.per_rank.at(size_t(position_)), source, schedule_.microbatches, true);
  sum_tied_grads();
  return losses;
}

std::vector<double> PipelineRuntime::evaluate(const MicroBatchSource& source, int microbatches) {
  // Forwards only, every micro-batch through the stages in order (GPipe's forward half).
  std::vector<Action> actions;
  for (int mb = 0; mb < microbatches; ++mb)
    for (int s = 0; s < schedule_.stages; ++s) {
      if (!here(s)) continue;
      if (s > 0 && !here(s - 1)) actions.push_back(Action::comm(ActionKind::RECV_F, s, mb, s - 1));
      actions.push_back(Action::compute(ActionKind::F, s, mb));
      if (s + 1 < schedule_.stages && !here(s + 1))
        actions.push_back(Action::comm(ActionKind::SEND_F, s, mb, s + 1));
    }
  // With FSDP the stages' parameters are gathered for the whole evaluation.
  for (int s = 0; s < schedule_.stages; ++s)
    if (here(s)) unshard(s, true);
  std::vector<double> losses = run(actions, source, microbatches, false);
  for (int s = 0; s < schedule_.stages; ++s)
    if (here(s)) unshard(s, false);
  return losses;
}

void PipelineRuntime::sum_tied_grads() {
  if (tied_pair_) tied_pair_->all_reduce(tied_->grad, comm::ReduceOp::sum);
}

}  // namespace h2::parallel::pipeline
