// The version string CMake passes in (see version.h).
#include "core/version.h"

namespace h2 {

std::string_view h2_version() {
  return H2_VERSION;
}

}  // namespace h2
