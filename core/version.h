// The H2 version (the CMake project's), for --version and for the keys of cached files that are
// only valid for the build that wrote them (profiles).
#pragma once

#include <string_view>

namespace h2 {

std::string_view h2_version();

}  // namespace h2
