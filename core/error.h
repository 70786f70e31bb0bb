// Errors: every failed check throws one of these types; callers catch h2::Error (or a subclass: a
// chip running out of memory, an unsupported op, bad user input) by value.
//
// The message (what()) is for users and names what was wrong and where it came from in *their*
// terms (a config key and its file:line, a rank, a tensor). The source line that raised it is kept
// apart (where()): the command-line tools print it only at H2_LOG_LEVEL=debug (user_message()).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

namespace h2 {

// A line of H2's source. `file` is __FILE__: a literal, so copying a SourceLine never allocates
// and an Error stays nothrow-copyable.
struct SourceLine {
  const char* file = nullptr;
  int line = 0;
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, SourceLine raised_at = {})
      : std::runtime_error(message), raised_at_(raised_at) {}
  // "core/ops.cpp:143": the raising line, relative to the source tree; empty when unknown.
  std::string where() const;
  SourceLine raised_at() const { return raised_at_; }

 private:
  SourceLine raised_at_;
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

// What a command-line tool prints for `e`: its message, and where H2 raised it when
// `with_source_line` (the tools pass H2_LOG_LEVEL is debug or trace).
std::string user_message(const std::exception& e, bool with_source_line);

// Whether H2_LOG_LEVEL asks for debug detail (debug or trace); read from the environment.
bool debug_requested();

}  // namespace h2

// H2_THROW(ErrorType, "fmt {}", args...): throws ErrorType with the message and this source line.
#define H2_THROW(Type, ...) \
  throw Type(::fmt::format(__VA_ARGS__), ::h2::SourceLine{__FILE__, __LINE__})

// H2_CHECK(cond, "fmt {}", args...): throws h2::Error unless cond holds.
#define H2_CHECK(cond, ...)                                                       \
  do {                                                                            \
    if (!(cond)) [[unlikely]]                                                     \
      throw ::h2::Error("check failed: " #cond ": " + ::fmt::format(__VA_ARGS__), \
                        ::h2::SourceLine{__FILE__, __LINE__});                    \
  } while (0)
