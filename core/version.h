// The H2 version (the CMake project's), the commit it was built from and the features the build
// has, for --version and for the keys of cached files that are only valid for the build that
// wrote them (profiles).
#pragma once

#include <string>
#include <string_view>

namespace h2 {

std::string_view h2_version();
// "874905edf832", with "-dirty" when the tree differed from it; "unknown" outside git.
std::string_view h2_build_commit();
// "CUDA on (sm_90), NCCL on, UCX on, ibverbs on, OpenBLAS (OpenMP), -march=native, Release".
std::string_view h2_build_features();
// "TOOL 0.1.0 (commit ...)\nbuilt with: ...": what `TOOL --version` prints.
std::string version_text(std::string_view tool);

}  // namespace h2
