// What a layer keeps between its forward and its backward, as a value that can leave the layer.
// Pipeline schedules run several micro-batches' forwards before their backwards: after a unit's
// forward they take its stash out (the unit is then empty, ready for the next micro-batch), and
// put it back right before the matching backward.
//
// Each layer lists its stash members once, in transfer_stash(StashTransfer&); the same function
// serves both directions, so taking and putting back can never disagree on the order.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace h2::nn {

using Stash = std::vector<Tensor>;

class StashTransfer {
 public:
  enum class Direction { take, put };
  StashTransfer(Direction direction, Stash& stash) : direction_(direction), stash_(stash) {}

  // take: moves `member` to the end of the stash (leaving it undefined); put: moves the next
  // tensor of the stash into `member`.
  void operator()(Tensor& member);
  // After a put: every tensor of the stash was used (checks that the stash fits the unit).
  void finish() const;

 private:
  Direction direction_;
  Stash& stash_;
  size_t next_ = 0;
};

}  // namespace h2::nn
