// The bridge between the runtime's optimizer state (parallel/runtime/model_state.h) and
// checkpoint folders (train/checkpoint/): the rows each rank writes, and a StateReader over a
// checkpoint, so that any plan saves and resumes without knowing how another plan split it.
#pragma once

#include <string>
#include <vector>

#include "parallel/runtime/model_state.h"
#include "train/checkpoint/checkpoint.h"

namespace h2::train {

// Masters as "model/NAME", moments as "optimizer/m/NAME" and "optimizer/v/NAME": each piece's
// share of rows (none where the piece has no share).
checkpoint::RankContents rank_contents(const std::vector<parallel::StatePiece>& pieces);

// Reads whole tensors of a checkpoint folder, verifying each file's checksum on first use.
class CheckpointStateReader final : public parallel::StateReader {
 public:
  explicit CheckpointStateReader(const std::string& checkpoint_dir) : reader_(checkpoint_dir) {}
  bool has_moments() const override { return !reader_.manifest().optimizer.empty(); }
  void read(parallel::StateKind kind, const std::string& name, Tensor& into) override;

 private:
  checkpoint::CheckpointReader reader_;
};

}  // namespace h2::train
