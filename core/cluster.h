// A cluster as hardware: chip types (what each computes, holds and moves), nodes (how many chips
// of which type), and the link class between any two chips (the same node and type, other nodes
// of one type, or another chip type: the cross-vendor path, usually the slowest). Plain data, read
// from configs/clusters/*.yaml (backends/vchip/cluster_file.h); virtual chips emulate it, DiComm
// paces transfers between its chips, and HeteroAuto plans on it.
//
// Ranks: a job on a cluster has one rank per chip, in node order (node 0's chips first); rank r
// drives vchip:r, because the virtual chips are registered in the same order.
// Glossary: C chips; link time of b bytes = latency + b / bandwidth.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace h2 {

// A chip type's modelled capabilities: a virtual chip's spec and a planner's chip model.
struct ChipSpec {
  std::string name;
  int count = 1;  // devices of this type (virtual chip registration)
  int64_t memory_bytes = 0;
  double memory_bandwidth = 0;  // bytes/s
  double link_bandwidth = 0;    // bytes/s between the chip and its host
  std::map<DType, double> peak_flops;
  DTypeSet dtypes;
  double time_scale = 1;  // multiplies the chip's modelled kernel times
  // Collectives and transfers between chips of this type go device to device through a vendor
  // library (NCCL, RCCL: multi-rail, no host staging) rather than DiComm's host-staged path;
  // only planning and simulation read it (virtual chips always stage).
  bool device_direct = false;

  // FLOP/s for `dtype` (0 when the chip has no entry).
  double peak(DType dtype) const;
};

struct LinkSpec {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // s
  double seconds(double bytes) const { return latency + bytes / bandwidth; }
};

enum class LinkClass { intra_node, inter_node, cross_type };
std::string_view link_class_name(LinkClass link);

struct ClusterNode {
  std::string chip;  // a chip type's name
  int count = 0;
};

struct Cluster {
  std::string name;
  std::string source;  // the file, for messages
  std::vector<ChipSpec> chips;
  std::vector<ClusterNode> nodes;
  std::map<std::string, LinkSpec> intra_node;  // by chip type: chips of one node
  std::map<std::string, LinkSpec> inter_node;  // by chip type: chips of different nodes
  // By chip type: its own cross-vendor link; two chips of different types use the slower of
  // their two (the lower bandwidth, the higher latency).
  std::map<std::string, LinkSpec> cross_type;
  // Multiplies every chip's and link's modelled time (slower everywhere, so that the host keeps
  // up with the emulated chips).
  double time_scale = 1;

  int size() const;  // chips, i.e. ranks
  const ChipSpec& chip(const std::string& type) const;
  const ChipSpec& chip_of(int rank) const;
  int node_of(int rank) const;
  LinkClass link_class(int a, int b) const;
  // The link between two ranks, with time_scale applied (latency x s, bandwidth / s).
  LinkSpec link(int a, int b) const;
  // Chip types in first appearance on the nodes, and how many chips of each there are.
  std::vector<std::string> chip_types() const;
  int count_of(const std::string& type) const;
  // The chips of one type alone (its nodes, its links): a homogeneous part of the cluster.
  Cluster part(const std::string& type) const;
};

}  // namespace h2
