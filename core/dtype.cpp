// DType names and parsing.
#include "core/dtype.h"

#include <fmt/ranges.h>

#include "core/error.h"

namespace h2 {
namespace {
constexpr std::string_view kNames[kDTypeCount] = {"f32",    "bf16", "f16", "f8e4m3", "f8e5m2",
                                                  "f4e2m1", "i32",  "i64", "u8"};
}

std::string_view dtype_name(DType t) {
  return kNames[static_cast<int>(t)];
}

DType parse_dtype(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  H2_THROW(ConfigError, "unknown dtype '{}' (expected one of {})", name, fmt::join(kNames, ", "));
}

}  // namespace h2
