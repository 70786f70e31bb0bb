// Whole numbers read from untrusted JSON (safetensors headers, checkpoint manifests, chip
// profiles). nlohmann's get<int64_t>() converts any JSON number: a fraction is truncated, and a
// number outside int64 (1e300, or an integer past 2^64, which nlohmann parses as a double) is cast
// with undefined behaviour. These take only a JSON integer within the bounds and otherwise throw
// ConfigError naming `what` (the file and the field) and the value. Templates on the JSON type, so
// core needs no JSON library.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace h2 {

// The value of `j`, a JSON integer in [lo, hi].
template <typename Json>
int64_t json_int(const Json& j, std::string_view what,
                 int64_t lo = std::numeric_limits<int64_t>::min(),
                 int64_t hi = std::numeric_limits<int64_t>::max()) {
  bool in_range = false;
  int64_t value = 0;
  if (j.is_number_unsigned()) {  // may exceed int64
    const uint64_t u = j.template get<uint64_t>();
    in_range = hi >= 0 && u <= uint64_t(hi) && int64_t(u) >= lo;
    value = in_range ? int64_t(u) : 0;
  } else if (j.is_number_integer()) {
    value = j.template get<int64_t>();
    in_range = value >= lo && value <= hi;
  }
  if (!in_range)
    H2_THROW(ConfigError, "{} = {} is not an integer in [{}, {}]", what,
             j.is_number() ? j.dump() : std::string("a JSON ") + j.type_name(), lo, hi);
  return value;
}

// The value of `j`, a JSON integer in [0, 2^64 - 1] (byte counts, checksums).
template <typename Json>
uint64_t json_uint(const Json& j, std::string_view what) {
  if (j.is_number_unsigned()) return j.template get<uint64_t>();
  return uint64_t(json_int(j, what, 0));  // a non-negative int64 given as a signed integer
}

// The elements of `j`, a JSON array of integers each in [lo, hi].
template <typename Json>
std::vector<int64_t> json_ints(const Json& j, std::string_view what,
                               int64_t lo = std::numeric_limits<int64_t>::min(),
                               int64_t hi = std::numeric_limits<int64_t>::max()) {
  if (!j.is_array())
    H2_THROW(ConfigError, "{} is a JSON {}, not a list of integers", what, j.type_name());
  std::vector<int64_t> values;
  for (const auto& element : j) values.push_back(json_int(element, what, lo, hi));
  return values;
}

}  // namespace h2
