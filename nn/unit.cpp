// The non-virtual parts of a unit: moving its stash, the frozen-weights scope (see unit.h).
#include "nn/unit.h"

#include <utility>

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

FrozenWeights::FrozenWeights(std::vector<Unit*> units) : units_(std::move(units)) {
  for (Unit* u : units_) u->set_weights_frozen(true);
}

FrozenWeights::~FrozenWeights() {
  for (Unit* u : units_) u->set_weights_frozen(false);
}

std::vector<Param*> params_of(Unit& unit) {
  std::vector<Param*> params;
  unit.collect(params);
  return params;
}

}  // namespace h2::nn
