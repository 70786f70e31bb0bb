// Stage -> units maps (see stage_layout.h).
#include "parallel/pipeline/stage_layout.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"

namespace h2::parallel::pipeline {

int StageLayout::stage_of_unit(int unit) const {
  for (int s = 0; s < stages(); ++s)
    if (unit >= begin(s) && unit < end(s)) return s;
  H2_THROW(Error, "unit {} is outside the layout {}", unit, str());
}

StageLayout StageLayout::from_block_counts(const std::vector<int>& blocks, int layers) {
  const int sum = std::accumulate(blocks.begin(), blocks.end(), 0);
  if (blocks.empty() || sum != layers)
    H2_THROW(ConfigError, "stage block counts [{}] sum to {}, but the model has {} layers",
             fmt::join(blocks, ", "), sum, layers);
  StageLayout layout;
  layout.first.push_back(0);
  int next_block = 0;
  for (size_t s = 0; s < blocks.size(); ++s) {
    const bool first_stage = s == 0, last_stage = s + 1 == blocks.size();
    if (blocks[s] < 0 || (blocks[s] == 0 && !first_stage && !last_stage))
      H2_THROW(ConfigError, "stage {} would hold {} blocks; middle stages need at least one", s,
               blocks[s]);
    next_block += blocks[s];
    // Unit index of block b is b + 1 (the embedding is unit 0); the head is unit layers + 1.
    layout.first.push_back(last_stage ? layers + 2 : next_block + 1);
  }
  return layout;
}

StageLayout StageLayout::uniform(int layers, int stages) {
  if (stages < 1 || stages > layers)
    H2_THROW(ConfigError, "{} pipeline stages for a model of {} layers (need 1 to {})", stages,
             layers, layers);
  std::vector<int> blocks;
  for (int s = 0; s < stages; ++s) blocks.push_back(layers / stages + (s < layers % stages));
  return from_block_counts(blocks, layers);
}

std::string StageLayout::str() const {
  const int head = first.back() - 1;
  std::string out;
  for (int s = 0; s < stages(); ++s) {
    if (s > 0) out += " | ";
    std::vector<std::string> parts;
    int b = begin(s), e = end(s);
    if (b == 0) {
      parts.push_back("embedding");
      ++b;
    }
    const bool has_head = e == head + 1;
    if (has_head) --e;
    if (e > b)
      parts.push_back(e - b == 1 ? fmt::format("block {}", b - 1)
                                 : fmt::format("blocks {}-{}", b - 1, e - 2));
    if (has_head) parts.push_back("head");
    out += fmt::format("{}", fmt::join(parts, "+"));
  }
  return out;
}

}  // namespace h2::parallel::pipeline
