// YAML parsing of virtual chip types (see chip_spec.h).
#include "backends/vchip/chip_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include "backends/vchip/builtin_chips.h"
#include "core/error.h"
#include "core/input_file.h"

namespace h2::vchip {
namespace {

std::string where(const std::string& source, const YAML::Node& node) {
  return fmt::format("{}:{}", source, node.Mark().line + 1);
}

// The text of a scalar node; a list or map where a scalar belongs is an error naming the key.
std::string scalar(const YAML::Node& node, const std::string& key, const std::string& source) {
  if (!node.IsScalar())
    H2_THROW(ConfigError, "{}: {} must be a single value, not a list or map", where(source, node),
             key);
  return node.Scalar();
}

double positive_number(const YAML::Node& node, const std::string& key, const std::string& source) {
  std::string text = scalar(node, key, source);
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    H2_THROW(ConfigError, "{}: {} = '{}' is not a number", where(source, node), key, text);
  if (!(value > 0) || !std::isfinite(value))
    H2_THROW(ConfigError, "{}: {} = {} must be positive", where(source, node), key, text);
  return value;
}

DType dtype_at(const YAML::Node& node, const std::string& key, const std::string& source) {
  try {
    return parse_dtype(scalar(node, key, source));
  } catch (const ConfigError& e) {
    H2_THROW(ConfigError, "{}: {}: {}", where(source, node), key, e.what());
  }
}

constexpr std::string_view kKeys[] = {"name",           "count",      "memory", "memory_bandwidth",
                                      "link_bandwidth", "peak_flops", "dtypes", "time_scale",
                                      "device_direct"};

ChipSpec parse_chip(const YAML::Node& node, const std::string& source) {
  if (!node.IsMap()) H2_THROW(ConfigError, "{}: a chip must be a map of keys", where(source, node));
  for (const auto& entry : node) {
    std::string key = scalar(entry.first, "a chip key", source);
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      H2_THROW(ConfigError, "{}: unknown chip key '{}' (expected one of {})",
               where(source, entry.first), key, fmt::join(kKeys, ", "));
  }
  for (const char* required : {"name", "memory", "memory_bandwidth", "peak_flops", "dtypes"})
    if (!node[required])
      H2_THROW(ConfigError, "{}: chip is missing '{}'", where(source, node), required);

  ChipSpec spec;
  spec.name = scalar(node["name"], "name", source);
  if (spec.name.empty() || spec.name.find_first_not_of("0123456789") == std::string::npos)
    H2_THROW(ConfigError, "{}: chip name '{}' must contain a letter (vchip:N means index N)",
             where(source, node["name"]), spec.name);
  std::string chip = fmt::format("chip '{}'", spec.name);
  if (node["count"]) {
    double count = positive_number(node["count"], chip + " count", source);
    if (count != std::floor(count) || count > 4096)
      H2_THROW(ConfigError, "{}: {} count = {} must be a whole number in [1, 4096]",
               where(source, node["count"]), chip, node["count"].Scalar());
    spec.count = int(count);
  }
  try {
    spec.memory_bytes = parse_bytes(scalar(node["memory"], chip + " memory", source));
  } catch (const ConfigError& e) {
    H2_THROW(ConfigError, "{}: {} memory: {}", where(source, node["memory"]), chip, e.what());
  }
  spec.memory_bandwidth =
      positive_number(node["memory_bandwidth"], chip + " memory_bandwidth", source);
  spec.link_bandwidth = node["link_bandwidth"] ? positive_number(node["link_bandwidth"],
                                                                 chip + " link_bandwidth", source)
                                               : spec.memory_bandwidth;
  if (node["time_scale"])
    spec.time_scale = positive_number(node["time_scale"], chip + " time_scale", source);
  if (node["device_direct"]) {
    const std::string flag = scalar(node["device_direct"], chip + " device_direct", source);
    if (flag != "true" && flag != "false")
      H2_THROW(ConfigError, "{}: {} device_direct = '{}' must be true or false",
               where(source, node["device_direct"]), chip, flag);
    spec.device_direct = flag == "true";
  }

  const YAML::Node& dtypes = node["dtypes"];
  if (!dtypes.IsSequence() || dtypes.size() == 0)
    H2_THROW(ConfigError, "{}: {} dtypes must be a non-empty list, e.g. [f32, bf16]",
             where(source, dtypes), chip);
  for (const auto& dtype : dtypes)
    spec.dtypes = spec.dtypes | DTypeSet{dtype_at(dtype, chip + " dtypes", source)};

  const YAML::Node& peaks = node["peak_flops"];
  if (!peaks.IsMap() || peaks.size() == 0)
    H2_THROW(ConfigError, "{}: {} peak_flops must be a non-empty map, e.g. {{f32: 50e12}}",
             where(source, peaks), chip);
  for (const auto& entry : peaks) {
    DType dtype = dtype_at(entry.first, chip + " peak_flops", source);
    spec.peak_flops[dtype] = positive_number(entry.second, chip + " peak_flops", source);
  }
  // Pacing needs a peak for every floating dtype the chip computes in (f32's serves the rest).
  if (!spec.peak_flops.contains(DType::f32))
    for (int i = 0; i < kDTypeCount; ++i)
      if (DType t = DType(i);
          is_floating(t) && spec.dtypes.contains(t) && !spec.peak_flops.contains(t))
        H2_THROW(ConfigError, "{}: {} peak_flops has no {} entry, which its dtypes list needs",
                 where(source, peaks), chip, dtype_name(t));
  return spec;
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  std::string number = text;
  double unit = 1;
  for (auto [suffix, factor] : kUnits) {
    std::string s(suffix);
    if (number.size() > s.size() && number.ends_with(s)) {
      number = number.substr(0, number.size() - s.size());
      unit = factor;
      break;
    }
  }
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (number.empty() || end == number.c_str() || *end != '\0' || !(value > 0))
    H2_THROW(ConfigError, "'{}' is not a positive size (e.g. 2GiB, 512MiB, 1e9)", text);
  if (value * unit >= 0x1p62) H2_THROW(ConfigError, "'{}' is larger than 2^62 bytes", text);
  return int64_t(std::llround(value * unit));
}

std::vector<ChipSpec> parse_chip_specs(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  // A scalar or list document has no keys to look up (yaml-cpp would throw BadSubscript).
  if (!root.IsMap() || !root["chips"] || !root["chips"].IsSequence())
    H2_THROW(ConfigError, "{}: expected a top-level 'chips:' list", source);
  std::vector<ChipSpec> specs;
  std::set<std::string> names;
  try {
    for (const auto& node : root["chips"]) {
      specs.push_back(parse_chip(node, source));
      if (!names.insert(specs.back().name).second)
        H2_THROW(ConfigError, "{}: chip name '{}' appears twice", where(source, node),
                 specs.back().name);
    }
  } catch (const YAML::Exception& e) {  // a conversion this file did not anticipate
    H2_THROW(ConfigError, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
  return specs;
}

std::vector<ChipSpec> load_chip_specs(const std::string& path) {
  return parse_chip_specs(read_input_file(path, "chip file"), path);
}

std::vector<ChipSpec> builtin_chip_specs() {
  return parse_chip_specs(std::string(kBuiltinChipsYaml),
                          "built-in chips (configs/chips/default.yaml)");
}

}  // namespace h2::vchip
