// The non-virtual parts of the model interface (see model.h).
#include "nn/model.h"

namespace h2::nn {

std::vector<Param*> parameters_of(Model& model) {
  std::vector<Param*> params;
  for (Unit* unit : model.units()) unit->collect(params);
  return params;
}

}  // namespace h2::nn
