// Which units of a model each pipeline stage runs. A Llama is the unit list [embedding, block 0
// .. block L-1, head]; stage s runs units [first[s], first[s + 1]) (contiguous, in order, every
// unit exactly once), so the embedding belongs to stage 0 and the head to the last stage.
// Stages may hold different numbers of blocks (HeteroPP gives faster chips more layers).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace h2::parallel::pipeline {

struct StageLayout {
  std::vector<int> first;  // stages + 1 entries: first[0] = 0, first[stages] = the unit count

  int stages() const { return int(first.size()) - 1; }
  int begin(int stage) const { return first.at(size_t(stage)); }
  int end(int stage) const { return first.at(size_t(stage) + 1); }
  int stage_of_unit(int unit) const;

  // `blocks[s]` transformer blocks on stage s (sum = the model's layers); the embedding joins
  // stage 0 and the head the last stage. Throws ConfigError naming the counts when a stage
  // would be empty or the sum is wrong.
  static StageLayout from_block_counts(const std::vector<int>& blocks, int layers);
  // `stages` stages with blocks as even as possible, earlier stages taking the remainder.
  static StageLayout uniform(int layers, int stages);

  std::string str() const;  // "embedding+blocks 0-1 | blocks 2-3+head"
};

}  // namespace h2::parallel::pipeline
