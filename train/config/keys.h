// The key table: one entry per config key (dotted name, type, range or choices, help, and an
// accessor to the field), from which YAML loading, `--set`, the help text and the dump derive.
// Defaults are not repeated here: they are the member initialisers of the structs in config.h.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "train/config/config.h"

namespace h2::config {

// choice: an enum field whose values are the key's `choices` in order (the enum's 0, 1, ...).
enum class KeyType { integer, number, boolean, string, dtype, choice };
std::string_view key_type_name(KeyType type);

// An enum field as the index of its value in the key's choices.
struct ChoiceField {
  int (*get)(const TrainConfig&);
  void (*set)(TrainConfig&, int);
};

// Accessors: plain function pointers, one per field type.
using Field =
    std::variant<int64_t* (*)(TrainConfig&), double* (*)(TrainConfig&), bool* (*)(TrainConfig&),
                 std::string* (*)(TrainConfig&), DType* (*)(TrainConfig&), ChoiceField>;

// Allowed numeric interval (integer and number keys); infinite bounds mean unbounded.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;  // lo itself is excluded
  bool hi_open = false;  // hi itself is excluded
  bool contains(double v) const;
  std::string str() const;  // "> 0", ">= 1", "[0, 1)"; empty when unbounded
};

struct KeyInfo {
  std::string_view name;  // "train.lr"
  KeyType type;
  Field field;
  std::string_view help;
  Range range{};
  std::string_view choices{};  // "text|bin": the only values allowed (string, dtype, choice)

  std::string_view section() const { return name.substr(0, name.find('.')); }
  std::string_view leaf() const { return name.substr(name.find('.') + 1); }
};

// All keys, in section order (model, train, data, log, parallel, cluster, precision, checkpoint).
std::span<const KeyInfo> keys();
// nullptr when there is no such key.
const KeyInfo* find_key(std::string_view name);
// True for a known section name.
bool is_section(std::string_view name);
// The closest known key or section to `name` (edit distance), for "did you mean" hints; empty when
// nothing is close.
std::string closest_key(std::string_view name);

// Sets the field from text; throws ConfigError "WHERE: KEY = 'TEXT' is not an integer" (or out of
// range, not one of ...). `where` is "FILE:LINE" or "--set".
void set_from_text(const KeyInfo& key, TrainConfig& config, std::string_view text,
                   std::string_view where);
// The field's current value as YAML scalar text (strings quoted, numbers shortest round-trip).
std::string value_text(const KeyInfo& key, const TrainConfig& config);

// The i-th of "a|b|c" (empty past the end), and the index of `text` in it (-1: absent).
std::string_view choice_name(std::string_view choices, int index);
int choice_index(std::string_view choices, std::string_view text);

}  // namespace h2::config
