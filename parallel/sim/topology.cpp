// A cluster's chips as ports of a flow network (see topology.h).
#include "parallel/sim/topology.h"

#include "core/error.h"

namespace h2::parallel::sim {

Topology::Topology(const Cluster& cluster) : cluster_(cluster) {
  const int n = cluster.size();
  ports_.resize(size_t(n));
  const std::map<std::string, LinkSpec>* specs[kClasses] = {
      &cluster.intra_node, &cluster.inter_node, &cluster.cross_type};
  static_assert(int(LinkClass::intra_node) == 0 && int(LinkClass::inter_node) == 1 &&
                int(LinkClass::cross_type) == 2);
  for (int chip = 0; chip < n; ++chip) {
    const std::string& type = cluster.chip_of(chip).name;
    for (int k = 0; k < kClasses; ++k) {
      auto spec = specs[k]->find(type);
      for (int side = 0; side < 2; ++side) {
        if (spec == specs[k]->end()) {
          ports_[size_t(chip)][size_t(k)][size_t(side)] = -1;
          continue;
        }
        ports_[size_t(chip)][size_t(k)][size_t(side)] = int(bandwidth_.size());
        bandwidth_.push_back(spec->second.bandwidth / cluster.time_scale);
      }
    }
  }
}

std::vector<int> Topology::path(int a, int b) const {
  H2_CHECK(a >= 0 && a < chips() && b >= 0 && b < chips() && a != b,
           "a transfer from chip {} to chip {} on a cluster of {} chips", a, b, chips());
  const int k = int(cluster_.link_class(a, b));
  const int send = ports_[size_t(a)][size_t(k)][0], receive = ports_[size_t(b)][size_t(k)][1];
  H2_CHECK(send >= 0 && receive >= 0, "{}: no {} link between chip {} ({}) and chip {} ({})",
           cluster_.source, link_class_name(LinkClass(k)), a, cluster_.chip_of(a).name, b,
           cluster_.chip_of(b).name);
  return {send, receive};
}

}  // namespace h2::parallel::sim
