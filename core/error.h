// Errors carry the file:line where they were raised. Every failed check throws one of these types;
// callers catch h2::Error (or a subclass: a chip running out of memory, an unsupported op) by
// value.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace h2 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device allocation that does not fit. The message names the device, the request and what is
// free.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// An op, dtype or optional device feature the target does not implement.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

// Bad user input: a config key, a chip description, a command-line value.
class ConfigError : public Error {
 public:
  using Error::Error;
};

namespace detail {
std::string with_location(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace h2

// H2_THROW(ErrorType, "fmt {}", args...): throws ErrorType with "file:line: message".
#define H2_THROW(Type, ...) \
  throw Type(::h2::detail::with_location(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)))

// H2_CHECK(cond, "fmt {}", args...): throws h2::Error unless cond holds.
#define H2_CHECK(cond, ...)                                                               \
  do {                                                                                    \
    if (!(cond)) [[unlikely]]                                                             \
      throw ::h2::Error(::h2::detail::with_location(                                      \
          __FILE__, __LINE__, "check failed: " #cond ": " + ::fmt::format(__VA_ARGS__))); \
  } while (0)
