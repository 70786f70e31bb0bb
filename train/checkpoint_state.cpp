// Optimizer state <-> checkpoint folders (see checkpoint_state.h).
#include "train/checkpoint_state.h"

#include <fmt/format.h>

#include <tuple>

namespace h2::train {

checkpoint::RankContents rank_contents(const std::vector<parallel::StatePiece>& pieces) {
  checkpoint::RankContents mine;
  for (const parallel::StatePiece& piece : pieces) {
    const int64_t rows = checkpoint::shard_rows(piece.master.shape());
    // Named variables, not a structured binding: Clang before 16 (the fuzzing build's 14)
    // refuses a lambda capturing a binding.
    int64_t begin = 0, end = 0;
    if (piece.shares != 0)
      std::tie(begin, end) = checkpoint::even_rows(rows, piece.share, piece.shares);
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
