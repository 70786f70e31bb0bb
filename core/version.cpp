// The version, commit and feature strings CMake passes in (see version.h).
#include "core/version.h"

#include <fmt/format.h>

#include "build_commit.h"  // generated at every build: H2_BUILD_COMMIT

namespace h2 {

std::string_view h2_version() {
  return H2_VERSION;
}

std::string_view h2_build_commit() {
  return H2_BUILD_COMMIT;
}

std::string_view h2_build_features() {
  return H2_BUILD_FEATURES;
}

std::string version_text(std::string_view tool) {
  return fmt::format("{} {} (commit {})\nbuilt with: {}", tool, h2_version(), h2_build_commit(),
                     h2_build_features());
}

}  // namespace h2
