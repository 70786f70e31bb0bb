// Source lines of errors relative to the source tree (short and stable), and the text the
// command-line tools print.
#include "core/error.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace h2 {

std::string Error::where() const {
  if (raised_at_.file == nullptr) return {};
  // Shorten to the path inside the source tree: from the first top-level folder named in it.
  std::string_view path(raised_at_.file);
  size_t start = std::string_view::npos;
  for (std::string_view root : {"/core/", "/comm/", "/backends/", "/nn/", "/optim/", "/models/",
                                "/parallel/", "/train/", "/cli/", "/h2run/", "/tests/", "/bench/"})
    start = std::min(start, path.find(root));
  if (start != std::string_view::npos) path = path.substr(start + 1);
  return fmt::format("{}:{}", path, raised_at_.line);
}

std::string user_message(const std::exception& e, bool with_source_line) {
  const auto* error = dynamic_cast<const Error*>(&e);
  if (!with_source_line || error == nullptr || error->where().empty()) return e.what();
  return fmt::format("{} [raised at {}]", e.what(), error->where());
}

bool debug_requested() {
  const char* level = std::getenv("H2_LOG_LEVEL");
  if (level == nullptr) return false;
  const std::string_view name(level);
  return name == "debug" || name == "trace";
}

}  // namespace h2
