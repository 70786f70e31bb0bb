// The plan of a training step (see plan.h).
#include "parallel/plan.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"
#include "parallel/pipeline/lowering.h"
#include "parallel/pipeline/validator.h"

namespace h2::parallel {

int Plan::ranks_per_replica() const {
  return std::accumulate(group_sizes.begin(), group_sizes.end(), 0);
}

Plan::Place Plan::place_of(int rank) const {
  H2_CHECK(rank >= 0 && rank < world_size(), "rank {} outside a plan of {} ranks", rank,
           world_size());
  Place place{.replica = rank / ranks_per_replica()};
  int offset = rank % ranks_per_replica();
  while (offset >= group_sizes[size_t(place.position)])
    offset -= group_sizes[size_t(place.position++)];
  place.group_rank = offset;
  return place;
}

int Plan::rank_at(const Place& place) const {
  int rank = place.replica * ranks_per_replica() + place.group_rank;
  for (int q = 0; q < place.position; ++q) rank += group_sizes[size_t(q)];
  return rank;
}

bool Plan::holds_unit(int rank, int unit) const {
  const int position = place_of(rank).position;
  for (int s = position; s < stages(); s += positions())
    if (unit >= layout.begin(s) && unit < layout.end(s)) return true;
  return false;
}

void Plan::check() const {
  auto fail = [&](const std::string& why) {
    H2_THROW(ConfigError, "{}: {}", source.empty() ? "plan" : source, why);
  };
  if (group_sizes.empty()) fail("a plan needs at least one stage group");
  for (size_t q = 0; q < group_sizes.size(); ++q) {
    if (group_sizes[q] < 1) fail(fmt::format("group {} has {} ranks", q, group_sizes[q]));
    if (micro_batch_rows % group_sizes[q] != 0)
      fail(fmt::format("micro-batches of {} rows cannot be split evenly over group {}'s {} ranks",
                       micro_batch_rows, q, group_sizes[q]));
  }
  if (replicas < 1) fail(fmt::format("{} replicas", replicas));
  if (int(devices.size()) != world_size())
    fail(fmt::format("{} devices for a plan of {} ranks", devices.size(), world_size()));
  if (micro_batches < 1) fail(fmt::format("{} micro-batches per step", micro_batches));
  if (micro_batch_rows < 1) fail(fmt::format("micro-batches of {} rows", micro_batch_rows));
  if (chunks < 1) fail(fmt::format("{} chunks per position", chunks));
  if (chunks > 1 && schedule != pipeline::ScheduleKind::kInterleaved1F1B)
    fail(fmt::format("{} chunks per position need the interleaved-1f1b schedule, not {}", chunks,
                     pipeline::schedule_kind_name(schedule)));
  if (stages() != positions() * chunks)
    fail(fmt::format("a layout of {} stages for {} groups x {} chunks", stages(), positions(),
                     chunks));
  if (gather_group < 0) fail(fmt::format("gather group {}", gather_group));
  if (lead < 0) fail(fmt::format("lead {} (micro-batches ahead) is negative", lead));
  if (lead > 0 && schedule != pipeline::ScheduleKind::k1F1B)
    fail(fmt::format("lead {} needs the 1f1b schedule, not {}", lead,
                     pipeline::schedule_kind_name(schedule)));
  // Blocking sends pair with the opposite receive only where every stage alternates one
  // forward and one backward with its neighbours; a lead or interleaved chunks break the pairs.
  if (!overlap && (lead > 0 || chunks > 1))
    fail(
        fmt::format("overlap off (blocking sends, a baseline) runs gpipe, 1f1b and zb-h1 "
                    "without a lead; this plan has {} with lead {} and {} chunks: those "
                    "schedules rely on overlap, blocking sends would deadlock",
                    pipeline::schedule_kind_name(schedule), lead, chunks));
}

pipeline::Schedule Plan::lowered_schedule() const {
  pipeline::LoweringOptions lowering;
  lowering.fsdp = fsdp;
  lowering.unshard.group_size = gather_group;
  pipeline::Schedule s = pipeline::lower(
      pipeline::generate(schedule, positions(), micro_batches, chunks, lead), lowering);
  pipeline::check_valid(s);
  return s;
}

std::string Plan::str() const {
  std::string shape;
  if (stages() == 1) {
    shape = "1 stage";
  } else {
    shape = fmt::format("{} stages ({}) on groups of {} ranks", stages(), layout.str(),
                        fmt::join(group_sizes, "+"));
  }
  if (stages() == 1 && ranks_per_replica() > 1)
    shape += fmt::format(" on a group of {} ranks", ranks_per_replica());
  if (replicas > 1)
    shape += fmt::format(" x {} replicas{}", replicas,
                         ranks_per_replica() == 1 ? " (data parallel)" : "");
  std::string out = fmt::format("{}, {}, {} micro-batch{} of {} rows", shape,
                                pipeline::schedule_kind_name(schedule), micro_batches,
                                micro_batches == 1 ? "" : "es", micro_batch_rows);
  if (chunks > 1) out += fmt::format(", {} chunks", chunks);
  if (lead > 0) out += fmt::format(", lead {}", lead);
  if (fsdp)
    out += gather_group > 0 ? fmt::format(", fsdp (gather per {})", gather_group) : ", fsdp";
  if (wire_dtype) out += fmt::format(", {} wire", dtype_name(*wire_dtype));
  if (recompute) out += ", recompute";
  return out;
}

}  // namespace h2::parallel
