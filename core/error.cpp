// Formats error locations relative to the source tree so messages stay short and stable.
#include "core/error.h"

#include <algorithm>
#include <string_view>

namespace h2::detail {

std::string with_location(const char* file, int line, const std::string& message) {
  // Shorten to the path inside the source tree: from the first top-level folder named in it.
  std::string_view path(file);
  size_t start = std::string_view::npos;
  for (std::string_view root : {"/core/", "/comm/", "/backends/", "/nn/", "/optim/", "/models/",
                                "/parallel/", "/train/", "/cli/", "/h2run/", "/tests/", "/bench/"})
    start = std::min(start, path.find(root));
  if (start != std::string_view::npos) path = path.substr(start + 1);
  return fmt::format("{}:{}: {}", path, line, message);
}

}  // namespace h2::detail
