// Planning shared by the commands (see planning.h).
#include "cli/planning.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "backends/registry.h"
#include "backends/vchip/cluster_file.h"
#include "cli/command.h"
#include "cli/job_cluster.h"
#include "cli/plan_output.h"
#include "comm/timeouts.h"
#include "core/env.h"
#include "core/error.h"
#include "train/checkpoint/durable_io.h"
#include "train/config/job_plan.h"
#include "train/config/keys.h"
#include "train/config/plan.h"

namespace h2::cli {
namespace {

namespace planner = parallel::planner;
namespace fs = std::filesystem;

std::optional<planner::ChipProfile> read_profile(const fs::path& path,
                                                 const planner::ProfileKey& want) {
  if (!fs::exists(path)) return std::nullopt;
  planner::ChipProfile p =
      planner::profile_from_json(checkpoint::read_file(path.string()), path.string());
  if (const std::string diff = want.difference(p.key); !diff.empty())
    H2_THROW(ConfigError,
             "{}: a profile for another setup ({}); delete it or measure again with "
             "h2 profile --force",
             path.string(), diff);
  return p;
}

}  // namespace

planner::ModelShape model_shape(const config::TrainConfig& c) {
  return {.vocab_size = c.model.vocab_size,
          .dim = c.model.dim,
          .n_layers = c.model.n_layers,
          .n_heads = c.model.n_heads,
          .n_kv_heads = c.model.n_kv_heads,
          .ffn_dim = c.model.ffn_dim,
          .seq_len = c.model.seq_len,
          .tie_embeddings = c.model.tie_embeddings};
}

double emulation_time_scale(const Cluster& cluster) {
  return cluster.time_scale * env_double("H2_VCHIP_TIME_SCALE", 0, 1e6);
}

void add_datasheet_options(CLI::App& app, bool& datasheet, std::vector<double>& efficiency) {
  app.add_flag("--datasheet", datasheet,
               "derive missing profiles from the chips' data-sheet figures instead of measuring "
               "(rooflines with stated efficiencies; parallel/planner/datasheet_profile.h)");
  app.add_option("--efficiency", efficiency,
                 "with --datasheet: GEMM, attention and memory-bandwidth efficiency "
                 "(default 0.6,0.4,0.8)")
      ->delimiter(',')
      ->expected(3);
}

void use_datasheet(ProfileRequest& request, const std::vector<double>& efficiency,
                   const std::string& flag) {
  request.datasheet = true;
  if (efficiency.empty()) return;
  for (double e : efficiency)
    if (!(e > 0 && e <= 1))
      H2_THROW(ConfigError, "{} {}: each efficiency is a fraction of peak in (0, 1]", flag,
               fmt::join(efficiency, ","));
  request.efficiency = {efficiency[0], efficiency[1], efficiency[2]};
}

std::vector<std::string> missing_profiles(const Cluster& cluster, const config::TrainConfig& config,
                                          const std::string& dir) {
  const planner::ModelShape shape = model_shape(config);
  const double scale = emulation_time_scale(cluster);
  std::vector<std::string> missing;
  for (const std::string& type : cluster.chip_types()) {
    const planner::ProfileKey key =
        planner::profile_key(cluster.chip(type), scale, shape, config.train.dtype);
    if (!fs::exists(fs::path(dir) / planner::profile_file_name(key))) missing.push_back(type);
  }
  return missing;
}

planner::Profiles cluster_profiles(const Cluster& cluster, const config::TrainConfig& config,
                                   const ProfileRequest& request) {
  const planner::ModelShape shape = model_shape(config);
  const double scale = emulation_time_scale(cluster);
  planner::Profiles profiles;
  std::vector<std::string> missing;
  // A data-sheet request asks for profiles of its efficiencies, a measuring one for measured
  // profiles: neither takes the other's cached files.
  const std::string origin =
      request.datasheet ? planner::datasheet_origin(request.efficiency) : planner::kMeasuredOrigin;
  for (const std::string& type : cluster.chip_types()) {
    const planner::ProfileKey key =
        planner::profile_key(cluster.chip(type), scale, shape, config.train.dtype, origin);
    const fs::path path = fs::path(request.dir) / planner::profile_file_name(key);
    std::optional<planner::ChipProfile> cached;
    if (!request.remeasure) cached = read_profile(path, key);
    if (cached) {
      if (request.print) request.print(fmt::format("{}: profile {}", type, path.string()));
      profiles.by_chip[type] = std::move(*cached);
    } else {
      missing.push_back(type);
    }
  }
  if (missing.empty()) return profiles;
  if (request.datasheet) {
    std::vector<int64_t> rows = request.options.rows;
    for (int64_t r = 16; r <= 1024; r *= 2) rows.push_back(r);  // planners at scale need more
    for (const std::string& type : missing) {
      const ChipSpec& spec = cluster.chip(type);
      planner::ChipProfile p = planner::datasheet_profile(spec, scale, shape, config.train.dtype,
                                                          rows, request.efficiency);
      const fs::path path = fs::path(request.dir) / planner::profile_file_name(p.key);
      write_text_file(path.string(), planner::to_json(p));
      if (request.print)
        request.print(fmt::format("{}: profile {} from its data-sheet figures ({})", type,
                                  path.string(), p.key.origin));
      profiles.by_chip[type] = std::move(p);
    }
    return profiles;
  }
  if (!request.measure_missing)
    H2_THROW(ConfigError,
             "{}: no profile of chip type{} {} in {}; run h2 profile --cluster {} CONFIG",
             cluster.source, missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), request.dir,
             cluster.source);
  // One virtual chip of each missing type, paced as in the job, with the threads a rank gets.
  RuntimeOptions options = RuntimeOptions::from_env();
  options.chips.clear();  // not the built-in chips: the cluster's, vchip:i the i-th missing type
  for (const std::string& type : missing) {
    ChipSpec spec = cluster.chip(type);
    spec.count = 1;
    spec.time_scale *= cluster.time_scale;
    options.chips.push_back(spec);
  }
  options.cpu.threads = request.threads > 0
                            ? request.threads
                            : std::max(1, comm::usable_cpu_count() / std::max(1, cluster.size()));
  auto runtime = create_runtime(options);
  for (size_t i = 0; i < missing.size(); ++i) {
    const std::string& type = missing[i];
    const planner::ProfileKey key =
        planner::profile_key(cluster.chip(type), scale, shape, config.train.dtype);
    if (request.print)
      request.print(fmt::format("{}: measuring ({} rows, {} repeats)...", type,
                                fmt::join(request.options.rows, "/"), request.options.repeats));
    planner::ChipProfile p =
        train::profile_chip(runtime->device(fmt::format("vchip:{}", i)), key, request.options);
    const fs::path path = fs::path(request.dir) / planner::profile_file_name(key);
    write_text_file(path.string(), planner::to_json(p));
    if (request.print) {
      request.print(
          fmt::format("{}: profile {} (host overran the emulated chip by {:.1f}% of its "
                      "time)",
                      type, path.string(), 100 * p.overrun_share));
      if (p.overrun_share > 0.02)
        request.print(fmt::format(
            "warning: {}: the host could not keep up with the emulated chip (overrun {:.1f}% > "
            "2%): these figures measure the host; raise the cluster's time_scale",
            type, 100 * p.overrun_share));
    }
    profiles.by_chip[type] = std::move(p);
  }
  return profiles;
}

planner::SearchSpace search_space(const config::TrainConfig& c) {
  planner::SearchSpace space;
  space.global_rows = c.train.batch_size * c.train.grad_accum * c.parallel.replicas;
  space.max_classes = kDefaultMaxClasses;
  return space;
}

void add_planning_options(CLI::App& app, PlanningSources& sources) {
  app.add_option("config", sources.config_path, "training config (model, global batch)")
      ->required();
  app.add_option("--cluster", sources.cluster_path, "cluster file (configs/clusters/*.yaml)")
      ->required();
  app.add_option("--part", sources.part,
                 "the cluster's chips of this type alone (a homogeneous part of the cluster)");
  app.add_option("--profiles", sources.profiles_dir,
                 "folder of cached profiles (default profiles; missing ones are measured)");
  add_datasheet_options(app, sources.datasheet, sources.efficiency);
  add_set_option(app, sources.overrides);
}

PlanningJob load_planning_job(const PlanningSources& sources) {
  PlanningJob job{.config = config::load_config(sources.config_path, sources.overrides),
                  .cluster = vchip::load_cluster(sources.cluster_path)};
  if (!sources.part.empty()) job.cluster = job.cluster.part(sources.part);
  ProfileRequest request{.dir = sources.profiles_dir, .print = print_line};
  if (sources.datasheet) use_datasheet(request, sources.efficiency, "--efficiency");
  request.options.seed = uint64_t(job.config.train.seed);
  job.profiles = cluster_profiles(job.cluster, job.config, request);
  return job;
}

planner::Candidate evaluate_plan_file(const std::string& path, config::TrainConfig config,
                                      const Cluster& cluster, const planner::CostInputs& inputs) {
  config.parallel.plan = path;
  const config::Plan file = config::load_plan(path);
  // The job the plan describes: its stages' ranks times its replicas (a plan may leave chips of
  // the cluster out), checked against the cluster below.
  // In int64, the file's replicas read through the key table (a ConfigError naming the file's
  // line and the value, and a bounded count), so that neither r + 1 nor ranks x replicas overflows.
  int64_t ranks = 0;
  for (const config::PlanStage& stage : file.stages)
    for (int r : stage.ranks) ranks = std::max(ranks, int64_t(r) + 1);
  for (const config::PlanSetting& setting : file.settings)
    if (setting.key == "parallel.replicas")
      config::set_from_text(*config::find_key(setting.key), config, setting.value, setting.where);
  const int64_t replicas = config.parallel.replicas;
  const int world = int(std::clamp<int64_t>(ranks * replicas, 1, cluster.size()));
  config::apply_plan(file, config, world);
  RuntimeOptions unused;
  apply_cluster(cluster, config, unused, world, /*whole_cluster=*/false);
  planner::Candidate c{.plan = config::plan_from_config(config, world)};
  c.estimate = planner::estimate(c.plan, inputs);
  c.tokens_per_s = c.estimate.tokens_per_s(c.plan, inputs.model);
  return c;
}

}  // namespace h2::cli
