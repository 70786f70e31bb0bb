// Log-level parsing (see log.h).
#include "core/log.h"

#include <string>

#include "core/error.h"

namespace h2 {

void set_log_level(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  // spdlog maps unknown names to "off"; only accept "off" when it was asked for.
  if (parsed == spdlog::level::off && level != "off")
    H2_THROW(ConfigError, "H2_LOG_LEVEL='{}' is not one of trace, debug, info, warn, error, off",
             level);
  spdlog::set_level(parsed);
}

}  // namespace h2
