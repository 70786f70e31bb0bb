// Formats error locations relative to the source tree so messages stay short and stable.
#include "core/error.h"

#include <string_view>

namespace h2::detail {

std::string with_location(const char* file, int line, const std::string& message) {
  std::string_view path(file);
  for (std::string_view root : {"/core/", "/backends/", "/launcher/", "/tests/", "/bench/"}) {
    if (auto pos = path.rfind(root); pos != std::string_view::npos) {
      path = path.substr(pos + 1);
      break;
    }
  }
  return fmt::format("{}:{}: {}", path, line, message);
}

}  // namespace h2::detail
