// Optimizer state <-> checkpoint folders (see checkpoint_state.h).
#include "train/checkpoint_state.h"

#include <fmt/format.h>

namespace h2::train {

checkpoint::RankContents rank_contents(const std::vector<parallel::StatePiece>& pieces) {
  checkpoint::RankContents mine;
  for (const parallel::StatePiece& piece : pieces) {
    const int64_t rows = checkpoint::shard_rows(piece.master.shape());
    const auto [begin, end] = piece.shares == 0
                                  ? std::pair<int64_t, int64_t>{0, 0}
                                  : checkpoint::even_rows(rows, piece.share, piece.shares);
    auto own = [&](std::vector<checkpoint::OwnedRows>& out, const std::string& name,
                   const Tensor& t) {
      out.push_back(
          {name, t.dtype(), t.shape(), begin, end,
           begin < end ? checkpoint::rows_source(t, begin, end) : checkpoint::TensorSource{}});
    };
    own(mine.model, piece.name, piece.master);
    own(mine.optimizer, "m/" + piece.name, piece.m);
    own(mine.optimizer, "v/" + piece.name, piece.v);
  }
  return mine;
}

void CheckpointStateReader::read(parallel::StateKind kind, const std::string& name, Tensor& into) {
  const bool master = kind == parallel::StateKind::master;
  const std::string stored = master                           ? name
                             : kind == parallel::StateKind::m ? "m/" + name
                                                              : "v/" + name;
  checkpoint::load_into(
      into,
      reader_.read(master ? checkpoint::Section::model : checkpoint::Section::optimizer, stored),
      fmt::format("{}: {}", reader_.dir(), name));
}

}  // namespace h2::train
