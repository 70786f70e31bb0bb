// The pipeline runtime's group collectives (see pipeline_runtime.h): FSDP gathers and gradient
// reductions of a stage's units, blocking or (overlap on) posted early and finished where the
// result is needed, with their spans on the communication lane.
#include <fmt/format.h>

#include "core/error.h"
#include "parallel/pipeline/pipeline_runtime.h"

namespace h2::parallel::pipeline {

void PipelineRuntime::unshard(int stage, bool gather) {
  for (int u = layout_.begin(stage); u < layout_.end(stage); ++u) {
    auto it = flats_.find(u);
    if (it == flats_.end()) continue;
    if (gather)
      it->second->unshard();
    else
      it->second->reshard();
  }
}

void PipelineRuntime::begin_gathers(int stage, bool backward_next) {
  const int begin = layout_.begin(stage), end = layout_.end(stage);
  for (int k = 0; k < end - begin; ++k) {
    const int u = backward_next ? end - 1 - k : begin + k;
    auto it = flats_.find(u);
    if (it == flats_.end()) continue;
    it->second->begin_unshard(gather_tag(u));
    if (it->second->unshard_in_flight()) lane_open(gather_tag(u), fmt::format("gather unit {}", u));
  }
}

void PipelineRuntime::await_gather(int unit) {
  auto it = flats_.find(unit);
  if (it == flats_.end() || !it->second->unshard_in_flight()) return;
  const auto start = std::chrono::steady_clock::now();
  it->second->finish_unshard();
  report_comm_wait(start);
  lane_close(gather_tag(unit));
}

void PipelineRuntime::begin_reduce(int unit) {
  auto it = flats_.find(unit);
  if (it == flats_.end()) return;
  it->second->begin_reduce_grad(reduce_tag(unit));
  lane_open(reduce_tag(unit), fmt::format("reduce unit {}", unit));
}

void PipelineRuntime::poll_group_transfers(int stage) {
  for (int u = layout_.begin(stage); u < layout_.end(stage); ++u) {
    auto it = flats_.find(u);
    if (it == flats_.end()) continue;
    fsdp::FlatParamGroup& flat = *it->second;
    if (flat.unshard_in_flight() && flat.poll_unshard()) lane_close(gather_tag(u));
    if (flat.reduce_in_flight() && flat.poll_reduce_grad()) lane_close(reduce_tag(u));
  }
}

void PipelineRuntime::reduce_grads(int stage) {
  if (!reduces_in_group()) return;  // final since the stage's last backward
  for (int u = layout_.end(stage) - 1; u >= layout_.begin(stage); --u) {
    if (auto it = flats_.find(u); it != flats_.end()) {
      it->second->reduce_grad();  // finishes a reduction posted behind the backward
      lane_close(reduce_tag(u));
    } else if (group_->size() > 1) {
      for (nn::Param* p : nn::params_of(*units_[size_t(u)]))
        group_->all_reduce(p->grad, comm::ReduceOp::sum);
    }
    report_final(u, u + 1);
  }
}

void PipelineRuntime::lane_open(int tag, const std::string& label) {
  if (!lane_) return;
  lane_ids_[tag] = next_lane_id_;
  lane_->transfer_posted(next_lane_id_++, label);
}

void PipelineRuntime::lane_close(int tag) {
  auto id = lane_ids_.find(tag);
  if (id == lane_ids_.end()) return;
  if (lane_) lane_->transfer_done(id->second);
  lane_ids_.erase(id);
}

}  // namespace h2::parallel::pipeline
