// A training config's plan (see job_plan.h).
#include "train/config/job_plan.h"

#include <fmt/format.h>

#include "core/error.h"
#include "parallel/pipeline/simulator.h"
#include "train/config/keys.h"
#include "train/config/plan.h"

namespace h2::config {
namespace {

std::string_view choice_of(const TrainConfig& c, std::string_view key) {
  const KeyInfo* info = find_key(key);
  return choice_name(info->choices, std::get<ChoiceField>(info->field).get(c));
}

std::optional<DType> wire_dtype(WireDtype wire) {
  switch (wire) {
    case WireDtype::compute:
      return std::nullopt;
    case WireDtype::f32:
      return DType::f32;
    case WireDtype::bf16:
      return DType::bf16;
    case WireDtype::f8e4m3:
      return DType::f8e4m3;
  }
  return std::nullopt;
}

// The stage groups of one pipeline replica: parallel.stage_ranks, or one rank per group.
std::vector<int> pipeline_groups(const TrainConfig& c, int world_size) {
  const int64_t replicas = c.parallel.replicas;
  if (world_size % replicas != 0)
    H2_THROW(ConfigError, "parallel.replicas = {} ({}) does not divide the job's {} ranks",
             replicas, c.origin_of("parallel.replicas"), world_size);
  const int ranks = world_size / int(replicas);
  if (c.parallel.stage_ranks.empty()) return std::vector<int>(size_t(ranks), 1);
  std::vector<int> groups = stage_layer_counts(c.parallel.stage_ranks, "parallel.stage_ranks");
  int total = 0;
  for (int g : groups) total += g;
  if (total != ranks)
    H2_THROW(ConfigError,
             "parallel.stage_ranks = '{}' ({}) makes groups of {} ranks; a replica has {} (the "
             "job's {} ranks / parallel.replicas {})",
             c.parallel.stage_ranks, c.origin_of("parallel.stage_ranks"), total, ranks, world_size,
             replicas);
  return groups;
}

}  // namespace

parallel::Plan plan_from_config(const TrainConfig& c, int world_size) {
  const ParallelConfig& p = c.parallel;
  const bool pipeline = p.mode == ParallelMode::pipeline;
  parallel::Plan plan;
  plan.source = !p.plan.empty()
                    ? p.plan
                    : fmt::format("parallel.mode {} ({})", choice_of(c, "parallel.mode"),
                                  c.origin_of("parallel.mode"));
  if (p.mode == ParallelMode::single && world_size > 1)
    H2_THROW(ConfigError,
             "{}: parallel.mode is 'single' but the job has {} ranks; set parallel.mode: dp or "
             "pipeline (or start one process)",
             c.origin_of("parallel.mode"), world_size);
  plan.group_sizes = pipeline ? pipeline_groups(c, world_size) : std::vector<int>{1};
  plan.replicas = p.mode == ParallelMode::dp ? world_size : pipeline ? int(p.replicas) : 1;
  plan.schedule = pipeline ? p.schedule : ScheduleKind::k1F1B;
  plan.chunks = pipeline ? int(p.chunks) : 1;
  plan.lead = pipeline ? int(p.lead) : 0;
  plan.overlap = p.overlap;
  plan.segment_bytes = size_t(p.segment_kb) << 10;
  const int layers = int(c.model.n_layers);
  // In int64: the groups (up to the job's ranks) x chunks can pass INT_MAX. No layout has more
  // stages than units (blocks, the embedding and the head).
  const int64_t stage_count = int64_t(plan.positions()) * plan.chunks;
  if (stage_count > int64_t(layers) + 2)
    H2_THROW(ConfigError,
             "{} stage groups x parallel.chunks {} ({}) make {} stages, more than the model's {} "
             "blocks (model.n_layers, {}) can fill",
             plan.positions(), p.chunks, c.origin_of("parallel.chunks"), stage_count, layers,
             c.origin_of("model.n_layers"));
  const int stages = int(stage_count);
  if (!pipeline || p.stage_layers.empty()) {
    plan.layout = parallel::pipeline::StageLayout::uniform(layers, stages);
  } else {
    const std::vector<int> blocks = stage_layer_counts(p.stage_layers);
    if (int(blocks.size()) != stages)
      H2_THROW(ConfigError,
               "parallel.stage_layers = '{}' ({}) lists {} stages; {} stage groups x "
               "parallel.chunks {} make {}",
               p.stage_layers, c.origin_of("parallel.stage_layers"), blocks.size(),
               plan.positions(), p.chunks, stages);
    plan.layout = parallel::pipeline::StageLayout::from_block_counts(blocks, layers);
  }
  plan.micro_batches = int(c.train.grad_accum);
  plan.micro_batch_rows = c.train.batch_size;
  plan.fsdp = pipeline && p.fsdp;
  plan.gather_group = pipeline ? int(p.gather_group) : 0;
  plan.wire_dtype = pipeline ? wire_dtype(p.wire_dtype) : std::nullopt;
  plan.recompute = pipeline && p.recompute;
  plan.bucket_bytes = size_t(p.bucket_mb * double(1 << 20));
  for (int r = 0; r < world_size; ++r) plan.devices.push_back(device_for_rank(c, r, world_size));
  plan.check();
  return plan;
}

void check_plan_memory(const parallel::Plan& plan, const TrainConfig& config, int rank,
                       const Device& device) {
  const parallel::Plan::Place place = plan.place_of(rank);
  const int64_t capacity = device.props().memory_bytes;
  // A plan file written by h2 plan carries the memory model's prediction per stage group, which
  // counts what the shape estimate below only bounds (allocator blocks, recomputation, the
  // schedule's stash): trust it.
  if (config.prediction && size_t(place.position) < config.prediction->peak_mib.size()) {
    const double predicted = config.prediction->peak_mib[size_t(place.position)] * (1 << 20);
    if (capacity > 0 && predicted > double(capacity))
      H2_THROW(ConfigError,
               "rank {} ({}, schedule position {}): the plan predicts {:.1f} MiB, the chip has "
               "{:.1f} MiB; plan again for this cluster (h2 plan)",
               rank, device.str(), place.position, predicted / (1 << 20),
               double(capacity) / (1 << 20));
    return;
  }
  const int stashed =
      parallel::pipeline::peak_stash(plan.lowered_schedule()).at(size_t(place.position));
  const int group = plan.group_sizes[size_t(place.position)];
  const int layers = int(config.model.n_layers), stages = plan.stages();
  double need = 0;  // bytes; a sum over up to 2^20 stages, so not in int64
  for (int s = place.position; s < stages; s += plan.positions()) {
    // Units: 0 the embedding, b + 1 block b, layers + 1 the head.
    const int first_block = std::max(plan.layout.begin(s), 1) - 1;
    const int last_block = std::min(plan.layout.end(s), layers + 1) - 2;
    need += double(estimate_stage_memory(config, first_block, last_block, s == 0, s == stages - 1,
                                         group, stashed)
                       .total());
  }
  if (capacity > 0 && need > double(capacity))
    H2_THROW(ConfigError,
             "rank {} ({}, schedule position {}): its stages need about {:.1f} MiB, the chip "
             "has {:.1f} MiB; move layers to a chip with more memory or enlarge the group",
             rank, device.str(), place.position, need / (1 << 20), double(capacity) / (1 << 20));
}

}  // namespace h2::config
