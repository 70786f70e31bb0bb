// manifest.json of a checkpoint folder (see manifest.h).
#include "train/checkpoint/manifest.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_int.h"
#include "train/checkpoint/durable_io.h"

namespace h2::checkpoint {
namespace {

constexpr int kVersion = 1;

nlohmann::json section_json(const std::map<std::string, TensorEntry>& tensors) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, t] : tensors) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const Piece& p : t.pieces)
      pieces.push_back({{"file", p.file}, {"key", p.key}, {"rows", {p.row_begin, p.row_end}}});
    out[name] = {{"dtype", dtype_name(t.dtype)},
                 {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                 {"pieces", pieces}};
  }
  return out;
}

DType manifest_dtype(const std::string& name, const std::string& where) {
  try {
    return parse_dtype(name);
  } catch (const Error&) {
    H2_THROW(ConfigError, "{}: unknown dtype '{}'", where, name);
  }
}

FileEntry file_entry(const nlohmann::json& f, const std::string& where) {
  const std::string hex = f.at("xxh3_64").get<std::string>();
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::invalid_argument("xxh3_64 '" + hex + "' is not 16 hex digits");
  return {json_uint(f.at("bytes"), where + " bytes"), std::stoull(hex, nullptr, 16)};
}

void read_section(const nlohmann::json& j, Manifest& m, Section section, const std::string& path) {
  for (const auto& [name, entry] : j.at(std::string(section_name(section))).items()) {
    const std::string where = fmt::format("{}: {} tensor '{}'", path, section_name(section), name);
    TensorEntry t;
    t.dtype = manifest_dtype(entry.at("dtype").get<std::string>(), where);
    const std::vector<int64_t> dims = json_ints(entry.at("shape"), where + " shape", 0);
    if (dims.size() > size_t(Shape::kMaxDims))
      H2_THROW(ConfigError, "{}: shape has {} dimensions; H2 holds at most {}", where, dims.size(),
               Shape::kMaxDims);
    for (int64_t d : dims) t.shape.push_back(d);
    int64_t next_row = 0;
    for (const auto& p : entry.at("pieces")) {
      auto rows = json_ints(p.at("rows"), where + " rows", 0);
      Piece piece{p.at("file").get<std::string>(), p.at("key").get<std::string>(),
                  rows.size() == 2 ? rows[0] : -1, rows.size() == 2 ? rows[1] : -1};
      if (piece.row_begin != next_row || piece.row_end <= piece.row_begin)
        H2_THROW(ConfigError, "{}: piece rows [{}, {}) do not continue at row {}", where,
                 piece.row_begin, piece.row_end, next_row);
      if (!m.files.contains(piece.file))
        H2_THROW(ConfigError, "{}: piece in '{}', which the manifest does not list", where,
                 piece.file);
      next_row = piece.row_end;
      t.pieces.push_back(std::move(piece));
    }
    if (next_row != shard_rows(t.shape))
      H2_THROW(ConfigError, "{}: pieces cover {} of {} rows", where, next_row, shard_rows(t.shape));
    m.tensors(section).emplace(name, std::move(t));
  }
}

}  // namespace

std::string_view section_name(Section section) {
  return section == Section::model ? "model" : "optimizer";
}

int64_t shard_rows(const Shape& shape) {
  return shape.rank() == 0 ? 1 : shape[0];
}

std::pair<int64_t, int64_t> even_rows(int64_t rows, int rank, int ranks) {
  return {rows * rank / ranks, rows * (rank + 1) / ranks};
}

std::string manifest_to_json(const Manifest& m) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, f] : m.files)
    files[name] = {{"bytes", f.bytes}, {"xxh3_64", checksum_hex(f.checksum)}};
  nlohmann::json j = {{"format", "h2-checkpoint"},
                      {"version", kVersion},
                      {"step", m.step},
                      {"world_size", m.world_size},
                      {"files", files},
                      {"model", section_json(m.model)},
                      {"optimizer", section_json(m.optimizer)}};
  if (m.trainer_state)
    j["trainer_state"] = {{"bytes", m.trainer_state->bytes},
                          {"xxh3_64", checksum_hex(m.trainer_state->checksum)}};
  return j.dump(1) + "\n";
}

Manifest manifest_from_json(const std::string& text, const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "h2-checkpoint")
      H2_THROW(ConfigError, "{}: not an h2 checkpoint manifest", path);
    if (j.at("version") != kVersion)
      H2_THROW(ConfigError, "{}: manifest version {} (this h2 reads version {})", path,
               j.at("version").dump(), kVersion);
    Manifest m;
    m.step = json_int(j.at("step"), path + ": step", 0);
    m.world_size = int(json_int(j.at("world_size"), path + ": world_size", 1, INT32_MAX));
    for (const auto& [name, f] : j.at("files").items()) {
      check_plain_file_name(name, path);
      m.files[name] = file_entry(f, fmt::format("{}: file '{}'", path, name));
    }
    if (j.contains("trainer_state"))
      m.trainer_state = file_entry(j.at("trainer_state"), path + ": trainer_state");
    read_section(j, m, Section::model, path);
    read_section(j, m, Section::optimizer, path);
    return m;
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: malformed manifest: {}", path, e.what());
  } catch (const std::logic_error& e) {  // std::stoull on a bad checksum
    H2_THROW(ConfigError, "{}: malformed checksum in the manifest: {}", path, e.what());
  }
}

}  // namespace h2::checkpoint
