// YAML cluster files (see cluster_file.h).
#include "backends/vchip/cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include "core/error.h"
#include "core/input_file.h"

namespace h2::vchip {
namespace {

std::string at(const std::string& source, const YAML::Node& node) {
  return fmt::format("{}:{}", source, node.Mark().line + 1);
}

void only_keys(const YAML::Node& map, std::initializer_list<std::string_view> keys,
               const std::string& what, const std::string& source) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      H2_THROW(ConfigError, "{}: unknown {} key '{}' (expected one of {})", at(source, entry.first),
               what, key, fmt::join(keys, ", "));
  }
}

double number(const YAML::Node& node, const std::string& what, const std::string& source) {
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value))
    H2_THROW(ConfigError, "{}: {} = '{}' is not a number", at(source, node), what, text);
  return value;
}

LinkSpec link_spec(const YAML::Node& node, const std::string& what, const std::string& source) {
  if (!node.IsMap())
    H2_THROW(ConfigError, "{}: {} must be a map {{bandwidth: BYTES_PER_S, latency: SECONDS}}",
             at(source, node), what);
  only_keys(node, {"bandwidth", "latency"}, what, source);
  if (!node["bandwidth"])
    H2_THROW(ConfigError, "{}: {} needs a bandwidth (bytes/s)", at(source, node), what);
  LinkSpec link{.bandwidth = number(node["bandwidth"], what + " bandwidth", source)};
  if (!(link.bandwidth > 0))
    H2_THROW(ConfigError,
             "{}: {} bandwidth = {} must be positive (a link that moves nothing cannot carry a "
             "pipeline; give its bytes/s)",
             at(source, node["bandwidth"]), what, node["bandwidth"].Scalar());
  if (node["latency"]) {
    link.latency = number(node["latency"], what + " latency", source);
    if (link.latency < 0)
      H2_THROW(ConfigError, "{}: {} latency = {} must not be negative", at(source, node["latency"]),
               what, node["latency"].Scalar());
  }
  return link;
}

// links.intra_node / inter_node: a map chip type -> link, types known and each needed one given.
std::map<std::string, LinkSpec> per_type(const YAML::Node& links, const char* key,
                                         const std::set<std::string>& needed, const Cluster& c) {
  std::map<std::string, LinkSpec> out;
  const YAML::Node node = links[key];
  if (node && !node.IsMap())
    H2_THROW(ConfigError, "{}: links.{} must map chip types to links", at(c.source, node), key);
  if (node)
    for (const auto& entry : node) {
      const std::string type = entry.first.as<std::string>();
      if (c.count_of(type) == 0)
        H2_THROW(ConfigError, "{}: links.{} names chip type '{}', which no node has",
                 at(c.source, entry.first), key, type);
      out[type] = link_spec(entry.second, fmt::format("links.{}.{}", key, type), c.source);
    }
  for (const std::string& type : needed)
    if (!out.contains(type))
      H2_THROW(ConfigError,
               "{}: links.{} has no entry for chip type '{}', whose chips use it; add "
               "'{}: {{bandwidth: BYTES_PER_S, latency: SECONDS}}'",
               c.source, key, type, type);
  return out;
}

}  // namespace

Cluster parse_cluster(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    H2_THROW(ConfigError, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  if (!root.IsMap())
    H2_THROW(ConfigError, "{}: a cluster file is a map (chips, nodes, links)", source);
  Cluster c;
  c.source = source;
  try {
    only_keys(root, {"name", "time_scale", "chips", "nodes", "links"}, "cluster", source);
    c.name = root["name"] ? root["name"].as<std::string>() : source;
    c.chips = parse_chip_specs(yaml_text, source);
    if (root["time_scale"]) {
      c.time_scale = number(root["time_scale"], "time_scale", source);
      if (!(c.time_scale > 0))
        H2_THROW(ConfigError, "{}: time_scale = {} must be positive",
                 at(source, root["time_scale"]), root["time_scale"].Scalar());
    }
    const YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence() || nodes.size() == 0)
      H2_THROW(ConfigError, "{}: a cluster needs a non-empty 'nodes' list of {{chip, count}}",
               source);
    std::vector<std::string> names;
    for (const ChipSpec& chip : c.chips) names.push_back(chip.name);
    std::map<std::string, int> nodes_of_type;
    for (const YAML::Node& n : nodes) {
      if (!n.IsMap()) H2_THROW(ConfigError, "{}: a node is a map {{chip, count}}", at(source, n));
      only_keys(n, {"chip", "count", "repeat"}, "node", source);
      if (!n["chip"] || !n["count"])
        H2_THROW(ConfigError, "{}: a node needs chip and count", at(source, n));
      ClusterNode node{.chip = n["chip"].as<std::string>()};
      if (std::find(names.begin(), names.end(), node.chip) == names.end())
        H2_THROW(ConfigError, "{}: node chip '{}' is not a chip type of this file (chips: {})",
                 at(source, n["chip"]), node.chip, fmt::join(names, ", "));
      const double count = number(n["count"], "node count", source);
      if (count < 1 || count != std::floor(count) || count > 1 << 20)
        H2_THROW(ConfigError, "{}: node count = {} must be a whole number of chips, at least 1",
                 at(source, n["count"]), n["count"].Scalar());
      node.count = int(count);
      // `repeat: K` stands for K identical nodes (a rack of them).
      double repeat = 1;
      if (n["repeat"]) {
        repeat = number(n["repeat"], "node repeat", source);
        if (repeat < 1 || repeat != std::floor(repeat) || repeat > 1 << 16)
          H2_THROW(ConfigError, "{}: repeat = {} must be a whole number of nodes, at least 1",
                   at(source, n["repeat"]), n["repeat"].Scalar());
      }
      // Checked before the nodes are added: count x repeat alone can pass 2^31 (Cluster::size()
      // sums in int).
      if (int64_t(c.size()) + int64_t(node.count) * int64_t(repeat) > 1 << 20)
        H2_THROW(ConfigError, "{}: more than {} chips (count {} x repeat {} after {})",
                 at(source, n), 1 << 20, node.count, int64_t(repeat), c.size());
      for (int k = 0; k < int(repeat); ++k) {
        ++nodes_of_type[node.chip];
        c.nodes.push_back(node);
      }
    }
    std::set<std::string> intra, inter;
    for (const ClusterNode& n : c.nodes)
      if (n.count > 1) intra.insert(n.chip);
    for (const auto& [type, count] : nodes_of_type)
      if (count > 1) inter.insert(type);
    const YAML::Node links = root["links"];
    if (links && !links.IsMap())
      H2_THROW(ConfigError, "{}: links must be a map (intra_node, inter_node, cross_type)",
               at(source, links));
    const YAML::Node no_links;
    const YAML::Node& l = links ? links : no_links;
    if (links) only_keys(links, {"intra_node", "inter_node", "cross_type"}, "links", source);
    c.intra_node = per_type(l, "intra_node", intra, c);
    c.inter_node = per_type(l, "inter_node", inter, c);
    if (nodes_of_type.size() > 1 && (!links || !links["cross_type"]))
      H2_THROW(ConfigError,
               "{}: the cluster mixes {} chip types but links.cross_type is missing; add "
               "'cross_type: {{bandwidth: BYTES_PER_S, latency: SECONDS}}'",
               source, nodes_of_type.size());
    if (links && links["cross_type"]) {  // checked even where one chip type leaves it unused
      const YAML::Node cross = links["cross_type"];
      std::set<std::string> all;
      for (const auto& [type, count] : nodes_of_type) all.insert(type);
      if (cross.IsMap() && cross["bandwidth"]) {  // one link for every type
        const LinkSpec link = link_spec(cross, "links.cross_type", source);
        for (const std::string& type : all) c.cross_type[type] = link;
      } else {  // each type's own cross-vendor link
        c.cross_type = per_type(l, "cross_type", all.size() > 1 ? all : std::set<std::string>{}, c);
      }
    }
  } catch (const YAML::Exception& e) {  // a conversion this parser did not anticipate
    H2_THROW(ConfigError, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
  return c;
}

Cluster load_cluster(const std::string& path) {
  return parse_cluster(read_input_file(path, "cluster file"), path);
}

std::vector<ChipSpec> cluster_chips(const Cluster& cluster) {
  std::vector<ChipSpec> specs;
  for (const ClusterNode& n : cluster.nodes) {
    ChipSpec spec = cluster.chip(n.chip);
    spec.count = n.count;
    spec.time_scale *= cluster.time_scale;
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace h2::vchip
