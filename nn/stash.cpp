// Moving a layer's stash out and back in (see stash.h).
#include "nn/stash.h"

#include "core/error.h"

namespace h2::nn {

void StashTransfer::operator()(Tensor& member) {
  if (direction_ == Direction::take) {
    stash_.push_back(std::move(member));
    member = Tensor();
    return;
  }
  H2_CHECK(next_ < stash_.size(), "stash holds {} tensors; the unit expects more", stash_.size());
  member = std::move(stash_[next_++]);
}

void StashTransfer::finish() const {
  H2_CHECK(direction_ == Direction::take || next_ == stash_.size(),
           "stash holds {} tensors; the unit used {}", stash_.size(), next_);
}

}  // namespace h2::nn
