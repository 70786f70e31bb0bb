// Cluster files (backends/vchip/cluster_file.h) and the links of a cluster (core/cluster.h).
// Checked against independent references:
//   - every shipped configs/clusters file: the parsed Cluster against the same file read a second
//     time with plain yaml-cpp (names, nodes in rank order with `repeat` expanded, chip counts,
//     time scale, and the link figures of every rank pair, or in the large files of a sample of
//     ranks in which every link class occurs, worked out here from the YAML's link classes); and
//     uniform-4, mixed-4 and mixed-8 against what their comments say (shape, ratios of figures);
//   - bad files: the ConfigError message must name the file, the line and the offending value
//     (or, for something missing, the file and what to add);
//   - link rules on hand-built Clusters: each rank pair's class and figures against a rank table
//     expanded here (same node and type: intra_node; same type, other node: inter_node; other
//     type: cross_type, the slower of the two types' links), time_scale applied by hand.
#include "backends/vchip/cluster_file.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace h2 {
namespace {

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message\n  " << text << "\ndoes not contain\n  " << part;
}

// The message of the ConfigError that parsing `yaml` raises ("no error" if it parses).
std::string error_of(const std::string& yaml, const std::string& source = "bad.yaml") {
  try {
    vchip::parse_cluster(yaml, source);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// Lines 1-4 of every hand-written file: two chip types.
const std::string kHead =
    "name: test\n"                                                                     // 1
    "chips:\n"                                                                         // 2
    "  - {name: chip-a, memory: 1GiB, memory_bandwidth: 1e9, peak_flops: {f32: 1e9},"  // 3
    " dtypes: [f32]}\n"
    "  - {name: chip-b, memory: 2GiB, memory_bandwidth: 2e9, peak_flops: {f32: 2e9},"  // 4
    " dtypes: [f32]}\n";

// A valid two-type file: lines 5-12.
const std::string kValid = kHead +
                           "nodes:\n"                                          // 5
                           "  - {chip: chip-a, count: 2}\n"                    // 6
                           "  - {chip: chip-b, count: 2}\n"                    // 7
                           "links:\n"                                          // 8
                           "  intra_node:\n"                                   // 9
                           "    chip-a: {bandwidth: 4e9, latency: 5e-6}\n"     // 10
                           "    chip-b: {bandwidth: 3e9, latency: 6e-6}\n"     // 11
                           "  cross_type: {bandwidth: 5e8, latency: 3e-5}\n";  // 12

// ---- shipped files --------------------------------------------------------------------------

std::string clusters_dir() {
  return std::string(H2_SOURCE_DIR) + "/configs/clusters";
}

std::vector<std::string> shipped_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(clusters_dir()))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

double yaml_number(const YAML::Node& node) {
  return std::stod(node.Scalar());
}

LinkSpec yaml_link(const YAML::Node& node) {
  EXPECT_TRUE(node.IsMap());
  return {yaml_number(node["bandwidth"]), node["latency"] ? yaml_number(node["latency"]) : 0.0};
}

TEST(ClusterFile, EveryShippedFileMatchesItsYaml) {
  const std::vector<std::string> files = shipped_files();
  ASSERT_GE(files.size(), 3u) << clusters_dir();
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    Cluster c;
    ASSERT_NO_THROW(c = vchip::load_cluster(path));
    const YAML::Node y = YAML::LoadFile(path);
    EXPECT_EQ(c.source, path);
    EXPECT_EQ(c.name, y["name"] ? y["name"].as<std::string>() : path);
    const double scale = y["time_scale"] ? yaml_number(y["time_scale"]) : 1.0;
    EXPECT_EQ(c.time_scale, scale);

    ASSERT_EQ(c.chips.size(), y["chips"].size());
    for (size_t i = 0; i < c.chips.size(); ++i) {
      EXPECT_EQ(c.chips[i].name, y["chips"][i]["name"].as<std::string>());
      EXPECT_EQ(c.chips[i].memory_bandwidth, yaml_number(y["chips"][i]["memory_bandwidth"]));
    }

    // Nodes in file order (an entry with `repeat: K` stands for K identical nodes); rank r's
    // node and type from a table expanded here.
    std::vector<ClusterNode> want_nodes;
    std::vector<std::string> type_of_rank;
    std::vector<int> node_of_rank;
    std::vector<int> sample;  // ranks whose every pair is checked
    for (const YAML::Node& entry : y["nodes"]) {
      const std::string chip = entry["chip"].as<std::string>();
      const int count = entry["count"].as<int>();
      const int repeat = entry["repeat"] ? entry["repeat"].as<int>() : 1;
      for (int k = 0; k < repeat; ++k) {
        // Small clusters: every rank. Large ones: the first two chips of an entry's first two
        // nodes and the last chip of its last node (every link class still occurs).
        for (int i = 0; i < count; ++i) {
          const bool edge = (k < 2 && i < 2) || (k == repeat - 1 && i == count - 1);
          if (edge || count * repeat * y["nodes"].size() <= 64)
            sample.push_back(int(type_of_rank.size()));
          type_of_rank.push_back(chip);
          node_of_rank.push_back(int(want_nodes.size()));
        }
        want_nodes.push_back({chip, count});
      }
    }
    ASSERT_EQ(c.nodes.size(), want_nodes.size());
    for (size_t n = 0; n < c.nodes.size(); ++n) {
      EXPECT_EQ(c.nodes[n].chip, want_nodes[n].chip) << "node " << n;
      EXPECT_EQ(c.nodes[n].count, want_nodes[n].count) << "node " << n;
    }
    ASSERT_EQ(c.size(), int(type_of_rank.size()));
    std::set<std::string> types(type_of_rank.begin(), type_of_rank.end());
    for (const std::string& t : types)
      EXPECT_EQ(c.count_of(t), std::count(type_of_rank.begin(), type_of_rank.end(), t)) << t;

    const YAML::Node links = y["links"];
    for (int a : sample) {
      EXPECT_EQ(c.node_of(a), node_of_rank[size_t(a)]) << "rank " << a;
      EXPECT_EQ(c.chip_of(a).name, type_of_rank[size_t(a)]) << "rank " << a;
      for (int b : sample) {
        if (a == b) continue;
        const std::string& ta = type_of_rank[size_t(a)];
        const std::string& tb = type_of_rank[size_t(b)];
        LinkClass want_class;
        LinkSpec want;
        if (ta != tb) {
          want_class = LinkClass::cross_type;
          const YAML::Node cross = links["cross_type"];
          const LinkSpec x = cross["bandwidth"] ? yaml_link(cross) : yaml_link(cross[ta]);
          const LinkSpec z = cross["bandwidth"] ? yaml_link(cross) : yaml_link(cross[tb]);
          want = {std::min(x.bandwidth, z.bandwidth), std::max(x.latency, z.latency)};
        } else if (node_of_rank[size_t(a)] == node_of_rank[size_t(b)]) {
          want_class = LinkClass::intra_node;
          want = yaml_link(links["intra_node"][ta]);
        } else {
          want_class = LinkClass::inter_node;
          want = yaml_link(links["inter_node"][ta]);
        }
        SCOPED_TRACE(testing::Message() << "ranks " << a << ", " << b);
        EXPECT_EQ(c.link_class(a, b), want_class);
        const LinkSpec got = c.link(a, b);
        EXPECT_DOUBLE_EQ(got.bandwidth, want.bandwidth / scale);
        EXPECT_DOUBLE_EQ(got.latency, want.latency * scale);
      }
    }

    // The virtual chips a job registers: one spec per node, in rank order.
    const std::vector<ChipSpec> specs = vchip::cluster_chips(c);
    ASSERT_EQ(specs.size(), c.nodes.size());
    for (size_t n = 0; n < specs.size(); ++n) {
      EXPECT_EQ(specs[n].name, want_nodes[n].chip);
      EXPECT_EQ(specs[n].count, want_nodes[n].count);
      EXPECT_DOUBLE_EQ(specs[n].time_scale, scale);  // no shipped chip sets its own
    }
  }
}

// What each shipped file's comment says of it: its shape, and the ratios between its figures.
TEST(ClusterFile, ShippedClustersHaveTheirDocumentedShape) {
  // "four chip-a on two nodes of two, ... NVLink vs. InfiniBand-like, 4:1 here"
  const Cluster u = vchip::load_cluster(clusters_dir() + "/uniform-4.yaml");
  EXPECT_EQ(u.name, "uniform-4");
  EXPECT_EQ(u.size(), 4);
  EXPECT_EQ(u.chip_types(), std::vector<std::string>{"chip-a"});
  EXPECT_EQ(u.link_class(0, 1), LinkClass::intra_node);
  EXPECT_EQ(u.link_class(2, 3), LinkClass::intra_node);
  EXPECT_EQ(u.link_class(1, 2), LinkClass::inter_node);
  EXPECT_EQ(u.link_class(3, 0), LinkClass::inter_node);
  EXPECT_DOUBLE_EQ(u.link(0, 1).bandwidth, 4 * u.link(1, 2).bandwidth);
  EXPECT_TRUE(u.cross_type.empty());

  // "two chip-a on one node and two chip-b on another ... chip-a computes twice as fast and has
  // half the memory; chip-b has twice the memory bandwidth ... a cross-vendor path 8x slower"
  const Cluster m4 = vchip::load_cluster(clusters_dir() + "/mixed-4.yaml");
  EXPECT_EQ(m4.name, "mixed-4");
  EXPECT_EQ(m4.size(), 4);
  EXPECT_EQ(m4.chip_types(), (std::vector<std::string>{"chip-a", "chip-b"}));
  EXPECT_EQ(m4.count_of("chip-a"), 2);
  EXPECT_EQ(m4.count_of("chip-b"), 2);
  const ChipSpec &a4 = m4.chip_of(0), &b4 = m4.chip_of(3);
  EXPECT_EQ(a4.name, "chip-a");
  EXPECT_EQ(b4.name, "chip-b");
  EXPECT_EQ(a4.peak(DType::f32), 2 * b4.peak(DType::f32));
  EXPECT_EQ(b4.memory_bytes, 2 * a4.memory_bytes);
  EXPECT_EQ(b4.memory_bandwidth, 2 * a4.memory_bandwidth);
  EXPECT_EQ(m4.link_class(0, 1), LinkClass::intra_node);
  EXPECT_EQ(m4.link_class(2, 3), LinkClass::intra_node);
  EXPECT_EQ(m4.link_class(1, 2), LinkClass::cross_type);
  EXPECT_DOUBLE_EQ(m4.link(0, 1).bandwidth, 8 * m4.link(1, 2).bandwidth);
  EXPECT_DOUBLE_EQ(m4.link(2, 3).bandwidth, 8 * m4.link(3, 0).bandwidth);
  EXPECT_TRUE(m4.inter_node.empty());  // every type sits on one node

  // "Eight emulated chips of three types": chip-a compute-rich and memory-poor, chip-b
  // memory-rich and compute-poor, chip-c between the two in compute and the slowest to reach the
  // other types.
  const Cluster m8 = vchip::load_cluster(clusters_dir() + "/mixed-8.yaml");
  EXPECT_EQ(m8.name, "mixed-8");
  EXPECT_EQ(m8.size(), 8);
  EXPECT_EQ(m8.chip_types(), (std::vector<std::string>{"chip-a", "chip-b", "chip-c"}));
  EXPECT_EQ(m8.count_of("chip-b"), 4);
  EXPECT_EQ(m8.node_of(5), 2);
  EXPECT_EQ(m8.chip_of(6).name, "chip-c");
  const ChipSpec &a8 = m8.chip("chip-a"), &b8 = m8.chip("chip-b"), &c8 = m8.chip("chip-c");
  EXPECT_GT(a8.peak(DType::f32), c8.peak(DType::f32));
  EXPECT_GT(c8.peak(DType::f32), b8.peak(DType::f32));
  EXPECT_GT(b8.memory_bytes, a8.memory_bytes);
  EXPECT_GT(b8.memory_bytes, c8.memory_bytes);
  auto per_flop = [](const ChipSpec& c) { return double(c.memory_bytes) / c.peak(DType::f32); };
  EXPECT_LT(per_flop(a8), per_flop(b8));
  EXPECT_LT(per_flop(a8), per_flop(c8));
  EXPECT_EQ(m8.link_class(3, 4), LinkClass::inter_node);  // chip-b on nodes 1 and 2
  EXPECT_EQ(m8.link_class(6, 7), LinkClass::intra_node);
  EXPECT_EQ(m8.link_class(0, 6), LinkClass::cross_type);
  // chip-c's cross-vendor link is the slowest, so it decides every pair it is in.
  const LinkSpec ab = m8.link(0, 2), ac = m8.link(0, 6), bc = m8.link(5, 7);
  EXPECT_LT(ac.bandwidth, ab.bandwidth);
  EXPECT_DOUBLE_EQ(ac.bandwidth, bc.bandwidth);
  EXPECT_DOUBLE_EQ(ac.bandwidth, m8.cross_type.at("chip-c").bandwidth / m8.time_scale);
  EXPECT_DOUBLE_EQ(m8.link(6, 0).bandwidth, ac.bandwidth);  // symmetric
  const std::vector<ChipSpec> specs = vchip::cluster_chips(m8);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[2].name, "chip-b");
  EXPECT_EQ(specs[2].count, 2);
  EXPECT_EQ(specs[2].time_scale, m8.time_scale);
}

// ---- valid hand-written files ---------------------------------------------------------------

TEST(ClusterFile, ParsesAHandWrittenFile) {
  const Cluster c = vchip::parse_cluster(kValid, "ok.yaml");
  EXPECT_EQ(c.name, "test");
  EXPECT_EQ(c.source, "ok.yaml");
  EXPECT_EQ(c.time_scale, 1);
  EXPECT_EQ(c.size(), 4);
  EXPECT_EQ(c.chip("chip-b").memory_bytes, int64_t(2) << 30);
  EXPECT_EQ(c.intra_node.at("chip-b").bandwidth, 3e9);
  EXPECT_EQ(c.intra_node.at("chip-b").latency, 6e-6);
  EXPECT_EQ(c.cross_type.at("chip-a").bandwidth, 5e8);  // one cross link given for every type
  EXPECT_EQ(c.cross_type.at("chip-b").latency, 3e-5);
  EXPECT_TRUE(c.inter_node.empty());
}

TEST(ClusterFile, LinkClassesAreRequiredOnlyWhereChipsUseThem) {
  // One chip per node and one node per type: only the cross-type link is used.
  const Cluster c = vchip::parse_cluster(kHead +
                                             "nodes: [{chip: chip-a, count: 1}, {chip: chip-b, "
                                             "count: 1}]\n"
                                             "links: {cross_type: {bandwidth: 1e9}}\n",
                                         "ok.yaml");
  EXPECT_EQ(c.size(), 2);
  EXPECT_EQ(c.link(0, 1).latency, 0);  // latency defaults to 0
  EXPECT_EQ(c.link(0, 1).bandwidth, 1e9);
  // A single chip needs no links at all.
  const Cluster one =
      vchip::parse_cluster(kHead + "nodes: [{chip: chip-b, count: 1}]\n", "one.yaml");
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(one.name, "test");
  // Without a name the file names the cluster.
  const Cluster unnamed = vchip::parse_cluster(
      kHead.substr(kHead.find('\n') + 1) + "nodes: [{chip: chip-a, count: 1}]\n", "unnamed.yaml");
  EXPECT_EQ(unnamed.name, "unnamed.yaml");
}

TEST(ClusterFile, PerTypeCrossLinksUseTheSlowerOfTheTwo) {
  const Cluster c = vchip::parse_cluster(kHead +
                                             "time_scale: 2\n"
                                             "nodes: [{chip: chip-a, count: 1}, {chip: chip-b, "
                                             "count: 1}]\n"
                                             "links:\n"
                                             "  cross_type:\n"
                                             "    chip-a: {bandwidth: 1e9, latency: 7e-5}\n"
                                             "    chip-b: {bandwidth: 3e8, latency: 1e-5}\n",
                                         "ok.yaml");
  EXPECT_EQ(c.time_scale, 2);
  const LinkSpec ab = c.link(0, 1), ba = c.link(1, 0);
  EXPECT_DOUBLE_EQ(ab.bandwidth, 3e8 / 2);  // chip-b's bandwidth
  EXPECT_DOUBLE_EQ(ab.latency, 7e-5 * 2);   // chip-a's latency
  EXPECT_DOUBLE_EQ(ba.bandwidth, ab.bandwidth);
  EXPECT_DOUBLE_EQ(ba.latency, ab.latency);
  // cluster_chips folds the cluster's time scale into each chip's own.
  const Cluster own = vchip::parse_cluster(
      "time_scale: 3\n"
      "chips:\n"
      "  - {name: chip-a, memory: 1GiB, memory_bandwidth: 1e9, peak_flops: {f32: 1e9},"
      " dtypes: [f32], time_scale: 0.5}\n"
      "nodes: [{chip: chip-a, count: 3}]\n"
      "links: {intra_node: {chip-a: {bandwidth: 1e9}}}\n",
      "ok.yaml");
  const std::vector<ChipSpec> specs = vchip::cluster_chips(own);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].count, 3);
  EXPECT_DOUBLE_EQ(specs[0].time_scale, 1.5);
}

// device_direct (planning and simulation only) is off unless a chip says true; anything but
// true or false is refused, naming the value.
TEST(ClusterFile, DeviceDirectIsAChipFlag) {
  auto file = [](const std::string& flag) {
    return "chips:\n"
           "  - {name: chip-a, memory: 1GiB, memory_bandwidth: 1e9, peak_flops: {f32: 1e9},"
           " dtypes: [f32]" +
           flag +
           "}\n"
           "nodes: [{chip: chip-a, count: 2}]\n"
           "links: {intra_node: {chip-a: {bandwidth: 1e9}}}\n";
  };
  EXPECT_FALSE(vchip::parse_cluster(file(""), "ok.yaml").chips[0].device_direct);
  EXPECT_TRUE(
      vchip::parse_cluster(file(", device_direct: true"), "ok.yaml").chips[0].device_direct);
  EXPECT_FALSE(
      vchip::parse_cluster(file(", device_direct: false"), "ok.yaml").chips[0].device_direct);
  EXPECT_TRUE(Contains(error_of(file(", device_direct: yes")), "device_direct = 'yes'"));
}

TEST(ClusterFile, RepeatStandsForIdenticalNodes) {
  const Cluster c = vchip::parse_cluster(kHead +
                                             "nodes:\n"
                                             "  - {chip: chip-a, count: 2, repeat: 3}\n"
                                             "  - {chip: chip-b, count: 1}\n"
                                             "links:\n"
                                             "  intra_node: {chip-a: {bandwidth: 4e9}}\n"
                                             "  inter_node: {chip-a: {bandwidth: 1e9}}\n"
                                             "  cross_type: {bandwidth: 5e8}\n",
                                         "ok.yaml");
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_EQ(c.size(), 7);
  EXPECT_EQ(c.count_of("chip-a"), 6);
  EXPECT_EQ(c.node_of(3), 1);
  EXPECT_EQ(c.node_of(5), 2);
  EXPECT_EQ(c.node_of(6), 3);
  EXPECT_EQ(c.link_class(2, 3), LinkClass::intra_node);
  EXPECT_EQ(c.link_class(1, 2), LinkClass::inter_node);
  EXPECT_EQ(c.link_class(0, 5), LinkClass::inter_node);
  EXPECT_EQ(c.link_class(5, 6), LinkClass::cross_type);
  EXPECT_EQ(vchip::cluster_chips(c).size(), 4u);
  // Repeated single-chip nodes are several nodes of one type: they need the inter-node link.
  EXPECT_TRUE(Contains(error_of(kHead + "nodes: [{chip: chip-a, count: 1, repeat: 2}]\n"),
                       "bad.yaml: links.inter_node has no entry for chip type 'chip-a'"));
  EXPECT_TRUE(Contains(error_of(kHead + "nodes:\n"                                     // 5
                                        "  - {chip: chip-a, count: 1, repeat: 0}\n"),  // 6
                       "bad.yaml:6: repeat = 0 must be a whole number of nodes"));
  EXPECT_TRUE(Contains(error_of(kHead + "nodes:\n  - {chip: chip-a, count: 1, repeat: 2.5}\n"),
                       "bad.yaml:6: repeat = 2.5 must be a whole number of nodes"));
}

// ---- bad files: file, line, value -----------------------------------------------------------

TEST(ClusterFileErrors, UnknownChipTypeInNodes) {
  const std::string e = error_of(kHead +
                                 "nodes:\n"                        // 5
                                 "  - {chip: chip-a, count: 1}\n"  // 6
                                 "  - {chip: chip-z, count: 1}\n"  // 7
                                 "links: {cross_type: {bandwidth: 1e9}}\n");
  EXPECT_TRUE(Contains(e, "bad.yaml:7: node chip 'chip-z' is not a chip type of this file"));
  EXPECT_TRUE(Contains(e, "chip-a, chip-b"));  // what it could be
}

TEST(ClusterFileErrors, ZeroOrNegativeBandwidth) {
  // In each link class, the line of the bandwidth value and the value itself.
  std::string zero = kValid;
  zero.replace(zero.find("bandwidth: 4e9"), 14, "bandwidth: 0");
  EXPECT_TRUE(Contains(error_of(zero),
                       "bad.yaml:10: links.intra_node.chip-a bandwidth = 0 "
                       "must be positive"));
  std::string negative = kValid;
  negative.replace(negative.find("bandwidth: 5e8"), 14, "bandwidth: -5e8");
  EXPECT_TRUE(Contains(error_of(negative),
                       "bad.yaml:12: links.cross_type bandwidth = -5e8 must be positive"));
  const std::string inter = kHead +
                            "nodes: [{chip: chip-a, count: 1}, {chip: chip-a, count: 1}]\n"  // 5
                            "links:\n"                                                       // 6
                            "  inter_node:\n"                                                // 7
                            "    chip-a:\n"                                                  // 8
                            "      bandwidth: -1\n";                                         // 9
  EXPECT_TRUE(
      Contains(error_of(inter), "bad.yaml:9: links.inter_node.chip-a bandwidth = -1 must be"));
  const std::string per_type = kHead +
                               "nodes: [{chip: chip-a, count: 1}, {chip: chip-b, count: 1}]\n"
                               "links:\n"                                        // 6
                               "  cross_type:\n"                                 // 7
                               "    chip-a: {bandwidth: 1e9}\n"                  // 8
                               "    chip-b: {bandwidth: 0.0, latency: 1e-5}\n";  // 9
  EXPECT_TRUE(Contains(error_of(per_type),
                       "bad.yaml:9: links.cross_type.chip-b bandwidth = 0.0 must be positive"));
  std::string latency = kValid;
  latency.replace(latency.find("latency: 6e-6"), 13, "latency: -6e-6");
  EXPECT_TRUE(
      Contains(error_of(latency),
               "bad.yaml:11: links.intra_node.chip-b latency = -6e-6 must not be negative"));
  std::string word = kValid;
  word.replace(word.find("bandwidth: 3e9"), 14, "bandwidth: fast");
  EXPECT_TRUE(Contains(error_of(word),
                       "bad.yaml:11: links.intra_node.chip-b bandwidth = 'fast' is not a number"));
  std::string missing = kValid;
  missing.replace(missing.find("bandwidth: 3e9, "), 16, "");
  EXPECT_TRUE(
      Contains(error_of(missing), "bad.yaml:11: links.intra_node.chip-b needs a bandwidth"));
}

TEST(ClusterFileErrors, MissingLinkClassBetweenTypesPresent) {
  // Two types and no cross_type at all: the file and what to add.
  std::string no_cross = kValid.substr(0, kValid.find("  cross_type"));
  const std::string e = error_of(no_cross);
  EXPECT_TRUE(Contains(e,
                       "bad.yaml: the cluster mixes 2 chip types but links.cross_type is "
                       "missing"));
  EXPECT_TRUE(Contains(e, "cross_type: {bandwidth: BYTES_PER_S, latency: SECONDS}"));
  // No links section at all.
  EXPECT_TRUE(
      Contains(error_of(kHead + "nodes: [{chip: chip-a, count: 1}, {chip: chip-b, count: 1}]\n"),
               "links.cross_type is missing"));
  // Per-type cross links that leave one type out.
  EXPECT_TRUE(
      Contains(error_of(kHead + "nodes: [{chip: chip-a, count: 1}, {chip: chip-b, count: 1}]\n"
                                "links: {cross_type: {chip-a: {bandwidth: 1e9}}}\n"),
               "bad.yaml: links.cross_type has no entry for chip type 'chip-b'"));
  // Two chips on one node of chip-b, and only chip-a's in-node link given.
  std::string no_intra_b = kValid;
  no_intra_b.erase(no_intra_b.find("    chip-b: {bandwidth: 3e9"),
                   std::string("    chip-b: {bandwidth: 3e9, latency: 6e-6}\n").size());
  EXPECT_TRUE(Contains(error_of(no_intra_b),
                       "bad.yaml: links.intra_node has no entry for chip type 'chip-b', whose "
                       "chips use it; add 'chip-b: {bandwidth: BYTES_PER_S, latency: SECONDS}'"));
  // chip-a on two nodes and no inter-node link for it.
  EXPECT_TRUE(
      Contains(error_of(kHead + "nodes: [{chip: chip-a, count: 1}, {chip: chip-a, count: 1}]\n"),
               "bad.yaml: links.inter_node has no entry for chip type 'chip-a'"));
}

TEST(ClusterFileErrors, DuplicateChipName) {
  const std::string e = error_of(
      "chips:\n"  // 1
      "  - {name: chip-a, memory: 1GiB, memory_bandwidth: 1e9, peak_flops: {f32: 1e9}, dtypes: "
      "[f32]}\n"  // 2
      "  - {name: chip-a, memory: 2GiB, memory_bandwidth: 2e9, peak_flops: {f32: 1e9}, dtypes: "
      "[f32]}\n"  // 3
      "nodes: [{chip: chip-a, count: 1}]\n");
  EXPECT_TRUE(Contains(e, "bad.yaml:3: chip name 'chip-a' appears twice"));
}

TEST(ClusterFileErrors, MalformedMemorySize) {
  std::string bad = kValid;
  bad.replace(bad.find("memory: 2GiB"), 12, "memory: 2QiB");
  const std::string e = error_of(bad);
  EXPECT_TRUE(Contains(e, "bad.yaml:4: chip 'chip-b' memory: "));
  EXPECT_TRUE(Contains(e, "'2QiB' is not a positive size"));
  std::string negative = kValid;
  negative.replace(negative.find("memory: 1GiB"), 12, "memory: -1GiB");
  EXPECT_TRUE(Contains(error_of(negative), "'-1GiB' is not a positive size"));
  EXPECT_TRUE(Contains(error_of(negative), "bad.yaml:3: chip 'chip-a' memory: "));
}

TEST(ClusterFileErrors, UnknownKeys) {
  // At the top level.
  EXPECT_TRUE(Contains(error_of(kValid + "nodez: []\n"),
                       "bad.yaml:13: unknown cluster key 'nodez' (expected one of name, "
                       "time_scale, chips, nodes, links)"));
  // In a node.
  std::string node = kValid;
  node.replace(node.find("{chip: chip-b, count: 2}"), 24, "{chip: chip-b, cuont: 2}");
  EXPECT_TRUE(Contains(error_of(node), "bad.yaml:7: unknown node key 'cuont'"));
  // In links.
  std::string links = kValid;
  links.replace(links.find("  cross_type:"), 13, "  cross_vendor:");
  EXPECT_TRUE(Contains(error_of(links), "bad.yaml:12: unknown links key 'cross_vendor'"));
  // In a link.
  std::string link = kValid;
  link.replace(link.find("latency: 6e-6"), 13, "latncy: 6e-6");
  EXPECT_TRUE(
      Contains(error_of(link), "bad.yaml:11: unknown links.intra_node.chip-b key 'latncy'"));
  // In a chip.
  std::string chip = kValid;
  chip.replace(chip.find("memory: 1GiB"), 6, "memroy");
  EXPECT_TRUE(Contains(error_of(chip), "bad.yaml:3: unknown chip key 'memroy'"));
  // A link class for a type no node has.
  std::string stray = kValid;
  stray.insert(stray.find("  cross_type"), "  inter_node: {chip-q: {bandwidth: 1e9}}\n");
  EXPECT_TRUE(
      Contains(error_of(stray),
               "bad.yaml:12: links.inter_node names chip type 'chip-q', which no node has"));
}

// intra_node and inter_node entries are validated even where no chip uses them (a type whose
// nodes hold one chip each, say), and so is links.cross_type in a one-type cluster: a bad value
// or a misspelt key there is refused, not ignored.
TEST(ClusterFileErrors, AnUnusedCrossTypeLinkIsStillValidated) {
  const std::string one_type = kHead +
                               "nodes: [{chip: chip-a, count: 2}]\n"          // 5
                               "links:\n"                                     // 6
                               "  intra_node: {chip-a: {bandwidth: 4e9}}\n";  // 7
  // The reference: an unused intra_node entry with a bad value is refused.
  ASSERT_TRUE(Contains(error_of(kHead + "nodes: [{chip: chip-a, count: 1}]\n"
                                        "links: {intra_node: {chip-a: {bandwidth: -1}}}\n"),
                       "bad.yaml:6: links.intra_node.chip-a bandwidth = -1 must be positive"));
  const std::string negative = error_of(one_type + "  cross_type: {bandwidth: -1}\n");  // 8
  const std::string misspelt = error_of(one_type + "  cross_type: {bandwith: 1e9}\n");  // 8
  EXPECT_TRUE(Contains(negative, "bad.yaml:8: links.cross_type bandwidth = -1 must be positive"));
  // Without a bandwidth the map reads as per-type links, and 'bandwith' is no chip type.
  EXPECT_TRUE(Contains(misspelt, "bad.yaml:8: links.cross_type names chip type 'bandwith'"));
}

TEST(ClusterFileErrors, BadNodesAndScale) {
  std::string zero = kValid;
  zero.replace(zero.find("{chip: chip-a, count: 2}"), 24, "{chip: chip-a, count: 0}");
  EXPECT_TRUE(Contains(error_of(zero), "bad.yaml:6: node count = 0 must be a whole number"));
  std::string half = kValid;
  half.replace(half.find("{chip: chip-b, count: 2}"), 24, "{chip: chip-b, count: 1.5}");
  EXPECT_TRUE(Contains(error_of(half), "bad.yaml:7: node count = 1.5 must be a whole number"));
  std::string no_count = kValid;
  no_count.replace(no_count.find("{chip: chip-b, count: 2}"), 24, "{chip: chip-b}");
  EXPECT_TRUE(Contains(error_of(no_count), "bad.yaml:7: a node needs chip and count"));
  EXPECT_TRUE(Contains(error_of(kHead + "nodes: []\n"),
                       "bad.yaml: a cluster needs a non-empty "
                       "'nodes' list"));
  EXPECT_TRUE(Contains(error_of("time_scale: 0\n" + kValid.substr(kValid.find("chips:"))),
                       "bad.yaml:1: time_scale = 0 must be positive"));
  EXPECT_TRUE(Contains(error_of("time_scale: slow\n" + kValid.substr(kValid.find("chips:"))),
                       "bad.yaml:1: time_scale = 'slow' is not a number"));
  EXPECT_TRUE(Contains(error_of("- a\n- b\n"), "bad.yaml: a cluster file is a map"));
  EXPECT_TRUE(Contains(error_of("nodes: [a, b"), "bad.yaml:1: not valid YAML"));
}

// Guards Cluster::size(), which sums the chips in int: count 2^20 x repeat 2^16 overflowed it
// (fuzz finding cluster_file-size-overflow) and wrapped past the 2^20-chip limit. count x repeat
// is checked in int64 before the nodes are added, as are the chips of earlier nodes.
TEST(ClusterFileErrors, CountTimesRepeatPastTheChipLimit) {
  EXPECT_TRUE(
      Contains(error_of(kHead + "nodes:\n"                                               // 5
                                "  - {chip: chip-a, count: 1048576, repeat: 65536}\n"),  // 6
               "bad.yaml:6: more than 1048576 chips (count 1048576 x repeat 65536"));
  EXPECT_TRUE(Contains(error_of(kHead + "nodes:\n"                              // 5
                                        "  - {chip: chip-a, count: 1048576}\n"  // 6
                                        "  - {chip: chip-b, count: 1}\n"),      // 7
                       "bad.yaml:7: more than 1048576 chips"));
}

TEST(ClusterFileErrors, LoadNamesThePath) {
  const std::string missing = "/nonexistent-dir/none.yaml";
  try {
    vchip::load_cluster(missing);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), "cannot open cluster file '" + missing + "'"));
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "h2_cluster_file_test_bad.yaml").string();
  std::string bad = kValid;
  bad.replace(bad.find("bandwidth: 4e9"), 14, "bandwidth: 0");
  std::ofstream(path) << bad;
  try {
    vchip::load_cluster(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), path + ":10: links.intra_node.chip-a bandwidth = 0"));
  }
  std::filesystem::remove(path);
}

// ---- link rules on hand-built clusters ------------------------------------------------------

// Types a and b; a on nodes 0 (2 chips) and 1 (3 chips), b on nodes 2 (1 chip) and 3 (2 chips).
// Every link figure distinct, so a wrong class or type shows in the figures too.
Cluster hand_built(double time_scale) {
  Cluster c;
  c.name = "hand";
  c.source = "hand-built";
  c.chips = {ChipSpec{.name = "a", .memory_bytes = 1 << 20}, ChipSpec{.name = "b"}};
  c.nodes = {{"a", 2}, {"a", 3}, {"b", 1}, {"b", 2}};
  c.intra_node = {{"a", {11e9, 1e-6}}, {"b", {12e9, 2e-6}}};
  c.inter_node = {{"a", {21e9, 3e-6}}, {"b", {22e9, 4e-6}}};
  // a: the lower bandwidth; b: the higher latency, so the pair takes one figure from each.
  c.cross_type = {{"a", {1e9, 5e-6}}, {"b", {4e9, 9e-5}}};
  c.time_scale = time_scale;
  return c;
}

TEST(ClusterLinks, EachPairUsesItsLinkClass) {
  for (double scale : {1.0, 2.5}) {
    SCOPED_TRACE(testing::Message() << "time_scale " << scale);
    const Cluster c = hand_built(scale);
    const std::vector<int> node = {0, 0, 1, 1, 1, 2, 3, 3};
    const std::vector<std::string> type = {"a", "a", "a", "a", "a", "b", "b", "b"};
    ASSERT_EQ(c.size(), 8);
    EXPECT_EQ(c.chip_types(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(c.count_of("a"), 5);
    EXPECT_EQ(c.count_of("b"), 3);
    EXPECT_EQ(c.count_of("z"), 0);
    int counted[3] = {0, 0, 0};
    for (int x = 0; x < 8; ++x) {
      EXPECT_EQ(c.node_of(x), node[size_t(x)]) << x;
      EXPECT_EQ(c.chip_of(x).name, type[size_t(x)]) << x;
      for (int y = 0; y < 8; ++y) {
        if (x == y) continue;
        SCOPED_TRACE(testing::Message() << "ranks " << x << ", " << y);
        const std::string& tx = type[size_t(x)];
        LinkClass want_class;
        LinkSpec want;
        if (tx != type[size_t(y)]) {
          want_class = LinkClass::cross_type;
          want = {1e9, 9e-5};
        } else if (node[size_t(x)] == node[size_t(y)]) {
          want_class = LinkClass::intra_node;
          want = tx == "a" ? LinkSpec{11e9, 1e-6} : LinkSpec{12e9, 2e-6};
        } else {
          want_class = LinkClass::inter_node;
          want = tx == "a" ? LinkSpec{21e9, 3e-6} : LinkSpec{22e9, 4e-6};
        }
        ++counted[int(want_class)];
        EXPECT_EQ(c.link_class(x, y), want_class);
        const LinkSpec got = c.link(x, y);
        EXPECT_DOUBLE_EQ(got.bandwidth, want.bandwidth / scale);
        EXPECT_DOUBLE_EQ(got.latency, want.latency * scale);
        // latency + bytes / bandwidth, computed here.
        EXPECT_DOUBLE_EQ(got.seconds(3e6), want.latency * scale + 3e6 / (want.bandwidth / scale));
      }
    }
    // Ordered pairs: intra 2 + 6 + 2, inter 2*3*2 + 1*2*2, cross 5*3*2.
    EXPECT_EQ(counted[int(LinkClass::intra_node)], 10);
    EXPECT_EQ(counted[int(LinkClass::inter_node)], 16);
    EXPECT_EQ(counted[int(LinkClass::cross_type)], 30);
  }
  EXPECT_EQ(link_class_name(LinkClass::intra_node), "intra_node");
  EXPECT_EQ(link_class_name(LinkClass::inter_node), "inter_node");
  EXPECT_EQ(link_class_name(LinkClass::cross_type), "cross_type");
}

TEST(ClusterLinks, RanksOutsideTheClusterAndUnknownTypesAreErrors) {
  const Cluster c = hand_built(1);
  EXPECT_THROW(c.node_of(8), Error);
  EXPECT_THROW(c.node_of(-1), Error);
  EXPECT_THROW(c.link(0, 8), Error);
  try {
    c.chip("z");
    ADD_FAILURE() << "no error for chip type z";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), "hand-built: no chip type 'z'"));
  }
}

TEST(ClusterLinks, PartKeepsOneTypeAndItsLinks) {
  const Cluster b = hand_built(2).part("b");
  EXPECT_EQ(b.name, "hand/b");
  EXPECT_EQ(b.size(), 3);
  ASSERT_EQ(b.chips.size(), 1u);
  EXPECT_EQ(b.chips[0].name, "b");
  EXPECT_TRUE(b.cross_type.empty());
  EXPECT_EQ(b.intra_node.size(), 1u);
  EXPECT_EQ(b.time_scale, 2);
  // Rank 0 of the part is the b chip alone on its node; ranks 1 and 2 share one.
  EXPECT_EQ(b.link_class(0, 1), LinkClass::inter_node);
  EXPECT_EQ(b.link_class(1, 2), LinkClass::intra_node);
  EXPECT_DOUBLE_EQ(b.link(0, 2).bandwidth, 22e9 / 2);
  EXPECT_DOUBLE_EQ(b.link(1, 2).latency, 2e-6 * 2);
}

}  // namespace
}  // namespace h2
