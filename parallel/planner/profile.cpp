// Chip profiles: keys, interpolation and the JSON file form (see profile.h).
#include "parallel/planner/profile.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_int.h"
#include "core/version.h"

namespace h2::parallel::planner {
namespace {

constexpr const char* kFormat = "h2-profile";
constexpr int kFormatVersion = 2;  // 2: forward_workspace_bytes, deferred_bytes

nlohmann::json shape_json(const ModelShape& m) {
  return {{"vocab_size", m.vocab_size}, {"dim", m.dim},
          {"n_layers", m.n_layers},     {"n_heads", m.n_heads},
          {"n_kv_heads", m.n_kv_heads}, {"ffn_dim", m.ffn_dim},
          {"seq_len", m.seq_len},       {"tie_embeddings", m.tie_embeddings}};
}

ModelShape shape_from(const nlohmann::json& j, const std::string& source) {
  auto size = [&](const char* key) {
    return json_int(j.at(key), fmt::format("{}: model.{}", source, key), 0);
  };
  return {.vocab_size = size("vocab_size"),
          .dim = size("dim"),
          .n_layers = size("n_layers"),
          .n_heads = size("n_heads"),
          .n_kv_heads = size("n_kv_heads"),
          .ffn_dim = size("ffn_dim"),
          .seq_len = size("seq_len"),
          .tie_embeddings = j.at("tie_embeddings")};
}

nlohmann::json cost_json(const UnitCost& c) {
  return {{"forward_s", c.forward_s},
          {"backward_s", c.backward_s},
          {"input_s", c.input_s},
          {"weight_s", c.weight_s},
          {"optimizer_s", c.optimizer_s},
          {"stash_bytes", c.stash_bytes},
          {"forward_workspace_bytes", c.forward_workspace_bytes},
          {"workspace_bytes", c.workspace_bytes},
          {"deferred_bytes", c.deferred_bytes}};
}

// `where`: "FILE: rows N block". Byte counts are at most 2^62, so that interpolating two of them
// (lerp) cannot overflow.
UnitCost cost_from(const nlohmann::json& j, const std::string& where) {
  auto bytes = [&](const char* key) {
    return json_int(j.at(key), fmt::format("{} {}", where, key), 0, int64_t(1) << 62);
  };
  return {.forward_s = j.at("forward_s"),
          .backward_s = j.at("backward_s"),
          .input_s = j.at("input_s"),
          .weight_s = j.at("weight_s"),
          .optimizer_s = j.at("optimizer_s"),
          .stash_bytes = bytes("stash_bytes"),
          .forward_workspace_bytes = bytes("forward_workspace_bytes"),
          .workspace_bytes = bytes("workspace_bytes"),
          .deferred_bytes = bytes("deferred_bytes")};
}

// A "rows" key: the whole text a micro-batch size in [1, 2^31] (ChipProfile::cost interpolates
// between sizes and must not overflow).
int64_t rows_key(const std::string& text, const std::string& source) {
  int64_t rows = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rows);
  if (error != std::errc() || end != text.data() + text.size() || rows < 1 ||
      rows > int64_t(1) << 31)
    H2_THROW(ConfigError, "{}: rows key '{}' is not a micro-batch size in [1, 2^31]", source, text);
  return rows;
}

// a + (b - a) * t, field by field.
// Linear in t between a (t = 0) and b (t = 1); beyond b (t > 1) never below b, so that noise
// in two measured sizes cannot extrapolate to a cost that shrinks, or turns negative, with size.
UnitCost lerp(const UnitCost& a, const UnitCost& b, double t) {
  auto mix = [t](double x, double y) {
    const double v = x + (y - x) * t;
    return t > 1 ? std::max(v, y) : v;
  };
  auto mix_bytes = [t](int64_t x, int64_t y) {
    const int64_t v = int64_t(std::llround(double(x) + double(y - x) * t));
    return t > 1 ? std::max(v, y) : v;
  };
  return {
      .forward_s = mix(a.forward_s, b.forward_s),
      .backward_s = mix(a.backward_s, b.backward_s),
      .input_s = mix(a.input_s, b.input_s),
      .weight_s = mix(a.weight_s, b.weight_s),
      .optimizer_s = mix(a.optimizer_s, b.optimizer_s),
      .stash_bytes = mix_bytes(a.stash_bytes, b.stash_bytes),
      .forward_workspace_bytes = mix_bytes(a.forward_workspace_bytes, b.forward_workspace_bytes),
      .workspace_bytes = mix_bytes(a.workspace_bytes, b.workspace_bytes),
      .deferred_bytes = mix_bytes(a.deferred_bytes, b.deferred_bytes)};
}

}  // namespace

int64_t ModelShape::embedding_parameters() const {
  return vocab_size * dim;
}

int64_t ModelShape::block_parameters() const {
  const int64_t kv = dim / n_heads * n_kv_heads;
  return 2 * dim * dim + 2 * dim * kv + 3 * dim * ffn_dim + 2 * dim;
}

int64_t ModelShape::head_parameters() const {
  return dim + (tie_embeddings ? 0 : vocab_size * dim);
}

int64_t ModelShape::parameters() const {
  return embedding_parameters() + n_layers * block_parameters() + head_parameters();
}

int64_t ModelShape::activation_bytes_per_row(DType dtype) const {
  return dtype_storage_bytes(dtype, seq_len * dim);
}

std::string_view unit_kind_name(UnitKind kind) {
  switch (kind) {
    case UnitKind::embedding:
      return "embedding";
    case UnitKind::block:
      return "block";
    case UnitKind::head:
      return "head";
  }
  return "?";
}

std::string ProfileKey::difference(const ProfileKey& o) const {
  if (chip != o.chip) return fmt::format("chip {} vs {}", chip, o.chip);
  if (chip_spec != o.chip_spec)
    return fmt::format("chip {}'s spec [{}] vs [{}]", chip, chip_spec, o.chip_spec);
  if (!(model == o.model))
    return fmt::format("model {} vs {}", shape_json(model).dump(), shape_json(o.model).dump());
  if (dtype != o.dtype)
    return fmt::format("dtype {} vs {}", dtype_name(dtype), dtype_name(o.dtype));
  if (h2_version != o.h2_version)
    return fmt::format("H2 version {} vs {}", h2_version, o.h2_version);
  if (origin != o.origin) return fmt::format("origin '{}' vs '{}'", origin, o.origin);
  return {};
}

ProfileKey profile_key(const ChipSpec& chip, double time_scale, const ModelShape& model,
                       DType dtype, std::string origin) {
  std::string peaks;
  for (const auto& [t, flops] : chip.peak_flops)
    peaks += fmt::format("{}{}={:g}", peaks.empty() ? "" : ",", dtype_name(t), flops);
  // The chip's capacity is left out: it changes no time or byte a profile holds.
  const std::string spec =
      fmt::format("memory_bandwidth={:g} link_bandwidth={:g} peak_flops={} time_scale={:g}",
                  chip.memory_bandwidth, chip.link_bandwidth, peaks, chip.time_scale * time_scale);
  return {chip.name, spec, model, dtype, std::string(h2_version()), std::move(origin)};
}

UnitCost ChipProfile::cost(UnitKind kind, int64_t rows) const {
  H2_CHECK(!by_rows.empty(), "profile of {}: no micro-batch size measured", key.chip);
  H2_CHECK(rows >= 1, "profile of {}: {} rows", key.chip, rows);
  const size_t k = size_t(kind);
  auto hi = by_rows.lower_bound(rows);
  if (hi != by_rows.end() && hi->first == rows) return hi->second[k];
  if (hi == by_rows.begin()) {  // below the smallest: scale towards 0 rows from it
    return lerp(UnitCost{}, hi->second[k], double(rows) / double(hi->first));
  }
  if (hi == by_rows.end()) {  // beyond the largest: extend the last two linearly
    auto last = std::prev(by_rows.end());
    if (last == by_rows.begin())
      return lerp(UnitCost{}, last->second[k], double(rows) / double(last->first));
    auto before = std::prev(last);
    const double t = double(rows - before->first) / double(last->first - before->first);
    return lerp(before->second[k], last->second[k], t);
  }
  auto lo = std::prev(hi);
  const double t = double(rows - lo->first) / double(hi->first - lo->first);
  return lerp(lo->second[k], hi->second[k], t);
}

std::string to_json(const ChipProfile& p) {
  nlohmann::json rows = nlohmann::json::object();
  for (const auto& [n, costs] : p.by_rows) {
    nlohmann::json units = nlohmann::json::object();
    for (int k = 0; k < kUnitKinds; ++k)
      units[std::string(unit_kind_name(UnitKind(k)))] = cost_json(costs[size_t(k)]);
    rows[std::to_string(n)] = units;
  }
  const nlohmann::json doc = {{"format", kFormat},
                              {"format_version", kFormatVersion},
                              {"chip", p.key.chip},
                              {"chip_spec", p.key.chip_spec},
                              {"model", shape_json(p.key.model)},
                              {"dtype", dtype_name(p.key.dtype)},
                              {"h2_version", p.key.h2_version},
                              {"overrun_share", p.overrun_share},
                              {"origin", p.key.origin},
                              {"rows", rows}};
  return doc.dump(2) + "\n";
}

ChipProfile profile_from_json(const std::string& text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: not a profile (JSON: {})", source, e.what());
  }
  try {
    if (doc.value("format", "") != kFormat)
      H2_THROW(ConfigError, "{}: not an H2 profile (format '{}')", source, doc.value("format", ""));
    if (doc.at("format_version") != kFormatVersion)
      H2_THROW(ConfigError,
               "{}: profile format {} (this H2 reads {}); measure again with h2 profile", source,
               doc.at("format_version").dump(), kFormatVersion);
    ChipProfile p;
    p.key = {doc.at("chip"),
             doc.at("chip_spec"),
             shape_from(doc.at("model"), source),
             parse_dtype(doc.at("dtype").get<std::string>()),
             doc.at("h2_version"),
             doc.value("origin", std::string(kMeasuredOrigin))};  // files before origins: measured
    p.overrun_share = doc.value("overrun_share", 0.0);
    for (const auto& [n, units] : doc.at("rows").items()) {
      const int64_t rows = rows_key(n, source);
      std::array<UnitCost, kUnitKinds> costs;
      for (int k = 0; k < kUnitKinds; ++k) {
        const std::string_view kind = unit_kind_name(UnitKind(k));
        costs[size_t(k)] =
            cost_from(units.at(std::string(kind)), fmt::format("{}: rows {} {}", source, n, kind));
      }
      p.by_rows[rows] = costs;
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed profile: {}", source, e.what());
  }
}

std::string profile_file_name(const ProfileKey& key) {
  const std::string text = key.chip_spec + shape_json(key.model).dump() +
                           std::string(dtype_name(key.dtype)) + key.h2_version + key.origin;
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{}.{}.{:016x}.json", key.chip, dtype_name(key.dtype), h);
}

}  // namespace h2::parallel::planner
