// Fuzzes cluster files (cluster.file, h2run --cluster, configs/clusters/*.yaml;
// backends/vchip/cluster_file.h): parse_cluster of the text, then what jobs and HeteroAuto ask of
// the result: its size, chip types, per-node chips (cluster_chips), each type's part, and the link
// between sample ranks (first and last of up to 64 nodes).
// Input: the cluster file's YAML text.
// Findings: a crash, a sanitizer report or an exception other than h2::Error
// (fuzz/fuzz_common.h). cluster_file.h promises that a link class is present wherever two chips
// use it, so a std::out_of_range from Cluster::link (its map lookups) is a finding too.
#include <string>
#include <vector>

#include "backends/vchip/cluster_file.h"
#include "core/cluster.h"
#include "core/error.h"
#include "fuzz/fuzz_common.h"

namespace {

int one_input(const uint8_t* data, size_t size) {
  using namespace h2;
  Cluster cluster;
  try {
    cluster = vchip::parse_cluster(std::string(fuzz::text(data, size)), "fuzz-cluster.yaml");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  const int ranks = cluster.size();
  H2_FUZZ_EXPECT(ranks >= 1, "a parsed cluster has " + std::to_string(ranks) + " chips");
  (void)vchip::cluster_chips(cluster);
  for (const std::string& type : cluster.chip_types()) {
    (void)cluster.count_of(type);
    (void)cluster.part(type).size();
  }
  std::vector<int> sample;
  int first = 0;
  for (size_t n = 0; n < cluster.nodes.size() && n < 64; ++n) {
    sample.push_back(first);
    sample.push_back(first + cluster.nodes[n].count - 1);
    first += cluster.nodes[n].count;
  }
  sample.push_back(ranks - 1);
  for (int a : sample)
    for (int b : sample) {
      if (a == b) continue;
      const LinkSpec link = cluster.link(a, b);
      (void)link.seconds(1 << 20);
      (void)cluster.chip_of(a);
    }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return h2::fuzz::run([&] { return one_input(data, size); });
}
