// The non-virtual parts of a unit: moving its stash (see unit.h).
#include "nn/unit.h"

namespace h2::nn {

Stash Unit::take_stash() {
  Stash stash;
  StashTransfer take(StashTransfer::Direction::take, stash);
  transfer_stash(take);
  return stash;
}

void Unit::put_stash(Stash stash) {
  StashTransfer put(StashTransfer::Direction::put, stash);
  transfer_stash(put);
  put.finish();
}

std::vector<Param*> params_of(Unit& unit) {
  std::vector<Param*> params;
  unit.collect(params);
  return params;
}

}  // namespace h2::nn
