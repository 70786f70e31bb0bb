// Leveled logging through spdlog. The level comes from H2_LOG_LEVEL when the Runtime is created.
// H2_LOG_WARN("fmt {}", x) etc. compile to spdlog calls on the default logger.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace h2 {
// Applies a level name (trace, debug, info, warn, error, off); throws ConfigError on others.
void set_log_level(std::string_view level);
}  // namespace h2

#define H2_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define H2_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define H2_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define H2_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
