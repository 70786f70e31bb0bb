// Chips, nodes and links of a cluster (see cluster.h).
#include "core/cluster.h"

#include <algorithm>

#include "core/error.h"

namespace h2 {

double ChipSpec::peak(DType dtype) const {
  auto it = peak_flops.find(dtype);
  return it == peak_flops.end() ? 0.0 : it->second;
}

std::string_view link_class_name(LinkClass link) {
  switch (link) {
    case LinkClass::intra_node:
      return "intra_node";
    case LinkClass::inter_node:
      return "inter_node";
    case LinkClass::cross_type:
      return "cross_type";
  }
  return "?";
}

int Cluster::size() const {
  int chips_total = 0;
  for (const ClusterNode& n : nodes) chips_total += n.count;
  return chips_total;
}

const ChipSpec& Cluster::chip(const std::string& type) const {
  for (const ChipSpec& c : chips)
    if (c.name == type) return c;
  H2_THROW(ConfigError, "{}: no chip type '{}'", source, type);
}

int Cluster::node_of(int rank) const {
  H2_CHECK(rank >= 0, "rank {}", rank);
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (rank < nodes[n].count) return int(n);
    rank -= nodes[n].count;
  }
  H2_THROW(Error, "{}: rank beyond the cluster's {} chips", source, size());
}

const ChipSpec& Cluster::chip_of(int rank) const {
  return chip(nodes[size_t(node_of(rank))].chip);
}

LinkClass Cluster::link_class(int a, int b) const {
  const int na = node_of(a), nb = node_of(b);
  if (nodes[size_t(na)].chip != nodes[size_t(nb)].chip) return LinkClass::cross_type;
  return na == nb ? LinkClass::intra_node : LinkClass::inter_node;
}

LinkSpec Cluster::link(int a, int b) const {
  LinkSpec link;
  const std::string& type = nodes[size_t(node_of(a))].chip;
  switch (link_class(a, b)) {
    case LinkClass::intra_node:
      link = intra_node.at(type);
      break;
    case LinkClass::inter_node:
      link = inter_node.at(type);
      break;
    case LinkClass::cross_type: {
      const LinkSpec& x = cross_type.at(type);
      const LinkSpec& y = cross_type.at(nodes[size_t(node_of(b))].chip);
      link = {std::min(x.bandwidth, y.bandwidth), std::max(x.latency, y.latency)};
      break;
    }
  }
  return {link.bandwidth / time_scale, link.latency * time_scale};
}

std::vector<std::string> Cluster::chip_types() const {
  std::vector<std::string> types;
  for (const ClusterNode& n : nodes)
    if (std::find(types.begin(), types.end(), n.chip) == types.end()) types.push_back(n.chip);
  return types;
}

int Cluster::count_of(const std::string& type) const {
  int count = 0;
  for (const ClusterNode& n : nodes)
    if (n.chip == type) count += n.count;
  return count;
}

Cluster Cluster::part(const std::string& type) const {
  Cluster p = *this;
  p.name = name + "/" + type;
  p.chips = {chip(type)};
  p.nodes.clear();
  for (const ClusterNode& n : nodes)
    if (n.chip == type) p.nodes.push_back(n);
  p.intra_node.clear();
  p.inter_node.clear();
  if (intra_node.contains(type)) p.intra_node[type] = intra_node.at(type);
  if (inter_node.contains(type)) p.inter_node[type] = inter_node.at(type);
  p.cross_type.clear();
  return p;
}

}  // namespace h2
