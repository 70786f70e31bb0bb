// Text helpers of the config key table (keys.cpp): edit distance for "did you mean", quoting
// and escaping values for messages and dumps, and UTF-8 validation of string values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace h2::config {

// Levenshtein distance between two key names.
size_t edit_distance(std::string_view a, std::string_view b);
// `s` in double quotes, with " and \ escaped and control bytes as \xNN (a YAML/JSON string).
std::string quoted(std::string_view s);
// Offset of the first byte of `s` that does not start a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points past U+10FFFF are not), or npos.
size_t invalid_utf8_at(std::string_view s);
// `s` with every byte outside printable ASCII as \xNN: shows a value that is not UTF-8.
std::string escaped(std::string_view s);

}  // namespace h2::config
