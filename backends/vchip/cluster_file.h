// Cluster files (configs/clusters/*.yaml): an emulated or real cluster as core/cluster.h
// describes it, read from YAML.
//
//   name: mixed-4
//   time_scale: 1                 # optional: multiplies every chip's and link's modelled time
//   chips:                        # chip types, in the schema of configs/chips/*.yaml (no count)
//     - {name: chip-a, memory: 2GiB, memory_bandwidth: 10e9, peak_flops: {f32: 40e9},
//        dtypes: [f32]}
//   nodes:                        # in rank order: node 0's chips are ranks 0 .. count - 1
//     - {chip: chip-a, count: 2}
//   links:                        # bandwidth bytes/s, latency s
//     intra_node: {chip-a: {bandwidth: 5e9, latency: 5e-6}}   # per type, within a node
//     inter_node: {chip-a: {bandwidth: 2e9, latency: 2e-5}}   # per type, between its nodes
//     cross_type: {bandwidth: 1e9, latency: 3e-5}             # between chip types
//     # or per type, each type's own cross-vendor link (a pair uses the slower of the two):
//     # cross_type: {chip-a: {bandwidth: 1e9}, chip-b: {bandwidth: 2e8, latency: 1e-4}}
//
// A link class is required exactly where two chips of the cluster use it. Every error names the
// file, the line and what to change, before any work.
#pragma once

#include <string>
#include <vector>

#include "backends/vchip/chip_spec.h"
#include "core/cluster.h"

namespace h2::vchip {

Cluster parse_cluster(const std::string& yaml_text, const std::string& source);
Cluster load_cluster(const std::string& path);

// The virtual chips a job on `cluster` registers: one spec per node, in rank order (so rank r
// drives vchip:r), each with the node's count and the cluster's time scale folded in.
std::vector<ChipSpec> cluster_chips(const Cluster& cluster);

}  // namespace h2::vchip
