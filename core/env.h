// Every H2_* environment knob, declared once in env.cpp with its default and help text.
// Reading a knob that is not in the table is a programming error and throws, so typos cannot
// silently fall back to a default. `h2 env` prints the table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace h2 {

struct EnvKnob {
  std::string_view name;
  std::string_view default_value;
  std::string_view help;
  bool secret = false;  // shown as set or unset, never its value (H2_JOB_TOKEN)
};

// The table, in a stable order.
std::span<const EnvKnob> env_knobs();

// The knob's value from the environment, or its default when unset or empty.
std::string env_string(std::string_view name);
// Parsed forms within [min, max]; a value that does not parse, is not finite or is out of range
// throws ConfigError naming the knob, the value and the range.
double env_double(std::string_view name, double min, double max);
long env_int(std::string_view name, long min, long max);
// A comma-separated list ("a,b,,c" -> {"a","b","c"}).
std::vector<std::string> env_list(std::string_view name);

}  // namespace h2
