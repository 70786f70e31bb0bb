// The one runtime of every plan (see plan_runtime.h).
#include "parallel/runtime/plan_runtime.h"

#include "core/env.h"
#include "core/error.h"
#include "core/runtime.h"
#include "parallel/exact_gather.h"

namespace h2::parallel {

PlanRuntime::PlanRuntime(Plan plan, nn::Model& model, comm::Communicator& job, int64_t seq_len,
                         optim::AdamwOptions adamw)
    : plan_(std::move(plan)), job_(job) {
  plan_.check();
  if (plan_.world_size() != job.size())
    H2_THROW(
        ConfigError, "{}: the plan needs {} ranks ({} per replica x {} replicas); the job has {}",
        plan_.source, plan_.world_size(), plan_.ranks_per_replica(), plan_.replicas, job.size());
  place_ = plan_.place_of(job.rank());
  comm::Communicator* replica = &job;
  if (plan_.replicas > 1) {
    const int offset = job.rank() % plan_.ranks_per_replica();
    replica_comm_ = job.split(place_.replica, offset);
    replicas_comm_ = job.split(offset, place_.replica);
    replica = replica_comm_.get();
  }
  executor_ = std::make_unique<pipeline::PipelineRuntime>(
      model, plan_.layout, plan_.lowered_schedule(), *replica,
      pipeline::PipelineOptions{
          .seq_len = seq_len,
          .group_sizes = plan_.group_sizes,
          .fsdp = plan_.fsdp,
          .wire_dtype = plan_.wire_dtype,
          .overlap = plan_.overlap,
          .segment_bytes = plan_.segment_bytes,
          .progress_thread_us = int(env_int("H2_PROGRESS_THREAD_US", 0, 1000000)),
          .loss_micro_batches = plan_.global_micro_batches()});
  host_ = &model.device().runtime().cpu();
  Device& host = *host_;
  if (replicas_comm_) {
    if (executor_->ties_across_ranks())
      H2_THROW(ConfigError,
               "{}: replicas of a pipeline whose first and last stages share tied embeddings on "
               "different ranks are not supported; set model.tie_embeddings: false",
               plan_.source);
    reducer_ = std::make_unique<GradientReducer>(*replicas_comm_, executor_->gradients_per_unit(),
                                                 plan_.bucket_bytes, host);
    executor_->set_gradients_final([this](int unit) { reducer_->unit_done(size_t(unit)); });
  }
  StateOwnership ownership{
      .job = &job,
      .host = &host,
      .replica = place_.replica,
      .replicas = plan_.replicas,
      .counts = [this](const std::string& name) { return executor_->counts_in_norm(name); }};
  if (executor_->fsdp()) {
    state_ = ModelState::sharded(executor_->flat_groups(), adamw, std::move(ownership));
  } else {
    std::vector<std::string> order;
    for (const nn::Param* p : nn::parameters_of(model)) order.push_back(p->name);
    state_ = ModelState::replicated(executor_->owned_parameters(), std::move(order), adamw,
                                    std::move(ownership));
  }
}

PlanRuntime::~PlanRuntime() = default;

double PlanRuntime::train_step(const BatchSource& source) {
  const int first = place_.replica * plan_.micro_batches;
  if (reducer_) reducer_->begin();
  const std::vector<double> losses =
      executor_->train_step([&](int mb) { return source(first + mb); });
  if (reducer_) reducer_->finish();
  double total = 0;  // this replica's micro-batches in order, then the replicas in order
  for (double loss : losses) total += loss;
  if (plan_.replicas > 1) {
    const auto all = gather_doubles(job_, *host_, {total});
    total = 0;
    for (int r = 0; r < plan_.replicas; ++r) total += all[size_t(plan_.rank_at({r, 0, 0}))][0];
  }
  return total / double(plan_.global_micro_batches());
}

double PlanRuntime::evaluate(const BatchSource& source, int batches) {
  const int replicas = plan_.replicas;
  const int mine = (batches - place_.replica + replicas - 1) / replicas;  // b = replica + i R
  std::vector<double> losses = executor_->evaluate(
      [&](int i) { return source(place_.replica + i * replicas); }, std::max(mine, 0));
  if (replicas > 1) {
    std::vector<double> spread(size_t(batches), 0.0);
    for (size_t i = 0; i < losses.size(); ++i)
      spread[size_t(place_.replica) + i * size_t(replicas)] = losses[i];
    const auto all = gather_doubles(job_, *host_, spread);
    losses.assign(size_t(batches), 0.0);
    for (int b = 0; b < batches; ++b)
      losses[size_t(b)] = all[size_t(plan_.rank_at({b % replicas, 0, 0}))][size_t(b)];
  }
  double total = 0;
  for (double loss : losses) total += loss;
  return batches > 0 ? total / double(batches) : 0.0;
}

}  // namespace h2::parallel
