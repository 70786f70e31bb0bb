// YAML parsing of virtual chip types (see chip_spec.h).
#include "backends/vchip/chip_spec.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/vchip/builtin_chips.h"
#include "core/error.h"

namespace h2::vchip {
namespace {

std::string where(const std::string& source, const YAML::Node& node) {
  return fmt::format("{}:{}", source, node.Mark().line + 1);
}

double positive_number(const YAML::Node& node, const std::string& key, const std::string& source) {
  double value = 0;
  try {
    value = node.as<double>();
  } catch (const YAML::Exception&) {
    H2_THROW(ConfigError, "{}: {} = '{}' is not a number", where(source, node), key,
             node.as<std::string>(""));
  }
  if (!(value > 0) || !std::isfinite(value))
    H2_THROW(ConfigError, "{}: {} = {} must be positive", where(source, node), key, value);
  return value;
}

ChipSpec parse_chip(const YAML::Node& node, const std::string& source) {
  static const std::set<std::string> kKeys = {
      "name",           "count",      "memory", "memory_bandwidth",
      "link_bandwidth", "peak_flops", "dtypes", "time_scale"};
  if (!node.IsMap()) H2_THROW(ConfigError, "{}: a chip must be a map of keys", where(source, node));
  for (const auto& entry : node) {
    std::string key = entry.first.as<std::string>();
    if (!kKeys.contains(key))
      H2_THROW(ConfigError,
               "{}: unknown chip key '{}' (expected one of name, count, memory, "
               "memory_bandwidth, link_bandwidth, peak_flops, dtypes, time_scale)",
               where(source, entry.first), key);
  }
  for (const char* required : {"name", "memory", "memory_bandwidth", "peak_flops", "dtypes"})
    if (!node[required])
      H2_THROW(ConfigError, "{}: chip is missing '{}'", where(source, node), required);

  ChipSpec spec;
  spec.name = node["name"].as<std::string>();
  std::string chip = fmt::format("chip '{}'", spec.name);
  if (node["count"]) spec.count = int(positive_number(node["count"], chip + " count", source));
  try {
    spec.memory_bytes = parse_bytes(node["memory"].as<std::string>());
  } catch (const Error& e) {
    H2_THROW(ConfigError, "{}: {} memory: {}", where(source, node["memory"]), chip, e.what());
  }
  spec.memory_bandwidth =
      positive_number(node["memory_bandwidth"], chip + " memory_bandwidth", source);
  spec.link_bandwidth = node["link_bandwidth"] ? positive_number(node["link_bandwidth"],
                                                                 chip + " link_bandwidth", source)
                                               : spec.memory_bandwidth;
  if (node["time_scale"])
    spec.time_scale = positive_number(node["time_scale"], chip + " time_scale", source);
  for (const auto& dtype : node["dtypes"]) {
    try {
      spec.dtypes = spec.dtypes | DTypeSet{parse_dtype(dtype.as<std::string>())};
    } catch (const ConfigError& e) {
      H2_THROW(ConfigError, "{}: {} dtypes: {}", where(source, dtype), chip, e.what());
    }
  }
  for (const auto& entry : node["peak_flops"]) {
    DType dtype;
    try {
      dtype = parse_dtype(entry.first.as<std::string>());
    } catch (const ConfigError& e) {
      H2_THROW(ConfigError, "{}: {} peak_flops: {}", where(source, entry.first), chip, e.what());
    }
    spec.peak_flops[dtype] = positive_number(entry.second, chip + " peak_flops", source);
  }
  if (spec.peak_flops.empty())
    H2_THROW(ConfigError, "{}: {} peak_flops is empty", where(source, node["peak_flops"]), chip);
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
  return int64_t(std::llround(value * unit));
}

std::vector<ChipSpec> parse_chip_specs(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  if (!root["chips"] || !root["chips"].IsSequence())
    H2_THROW(ConfigError, "{}: expected a top-level 'chips:' list", source);
  std::vector<ChipSpec> specs;
  std::set<std::string> names;
  for (const auto& node : root["chips"]) {
    specs.push_back(parse_chip(node, source));
    if (!names.insert(specs.back().name).second)
      H2_THROW(ConfigError, "{}: chip name '{}' appears twice", where(source, node),
               specs.back().name);
  }
  return specs;
}

std::vector<ChipSpec> load_chip_specs(const std::string& path) {
  std::ifstream file(path);
  if (!file) H2_THROW(ConfigError, "cannot open chip file '{}'", path);
  std::stringstream text;
  text << file.rdbuf();
  return parse_chip_specs(text.str(), path);
}

std::vector<ChipSpec> builtin_chip_specs() {
  return parse_chip_specs(std::string(kBuiltinChipsYaml),
                          "built-in chips (configs/chips/default.yaml)");
}

}  // namespace h2::vchip
