// Clusters for the simulator's tests, built in code (no files).
#pragma once

#include "core/cluster.h"

namespace h2::parallel::sim::testing {

// Nodes 0 and 1: 2 chips of type a each (chips 0-3); nodes 2 and 3: 2 of type b (chips 4-7).
// a: intra-node 100 GB/s, 1 us; inter-node 25 GB/s, 5 us; cross-type 10 GB/s, 20 us.
// b: 50 GB/s, 2 us; 20 GB/s, 6 us; 4 GB/s, 30 us. time_scale 2 (bandwidths halve, latencies
// double).
inline Cluster two_types() {
  Cluster c;
  c.name = "test";
  c.source = "two_types";
  c.chips = {ChipSpec{.name = "a"}, ChipSpec{.name = "b"}};
  c.nodes = {{"a", 2}, {"a", 2}, {"b", 2}, {"b", 2}};
  c.intra_node = {{"a", {100e9, 1e-6}}, {"b", {50e9, 2e-6}}};
  c.inter_node = {{"a", {25e9, 5e-6}}, {"b", {20e9, 6e-6}}};
  c.cross_type = {{"a", {10e9, 20e-6}}, {"b", {4e9, 30e-6}}};
  c.time_scale = 2;
  return c;
}

// One node of `chips` chips of type a: intra-node 100 GB/s, 1 us; time_scale 1.
inline Cluster one_node(int chips) {
  Cluster c;
  c.name = "node";
  c.source = "one_node";
  c.chips = {ChipSpec{.name = "a"}};
  c.nodes = {{"a", chips}};
  c.intra_node = {{"a", {100e9, 1e-6}}};
  return c;
}

}  // namespace h2::parallel::sim::testing
