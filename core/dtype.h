// Element types. Storage dtype is a property of each tensor, never a compile-time switch, because
// one job runs chips with different dtypes. f4e2m1 packs two elements per byte (low nibble first).
#pragma once

#include <cstdint>
#include <string_view>

namespace h2 {

enum class DType : uint8_t { f32, bf16, f16, f8e4m3, f8e5m2, f4e2m1, i32, i64, u8 };
inline constexpr int kDTypeCount = 9;

// Storage bits per element: 4 for f4e2m1, otherwise a whole number of bytes.
constexpr int dtype_bits(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 32;
    case DType::bf16:
    case DType::f16:
      return 16;
    case DType::f8e4m3:
    case DType::f8e5m2:
    case DType::u8:
      return 8;
    case DType::f4e2m1:
      return 4;
    case DType::i64:
      return 64;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t != DType::i32 && t != DType::i64 && t != DType::u8;
}

// Bytes needed for n >= 0 contiguous elements (rounds f4 up to whole bytes). Whole groups of 8
// elements first, so that no intermediate overflows where the result itself fits in int64.
constexpr int64_t dtype_storage_bytes(DType t, int64_t n) {
  return n / 8 * dtype_bits(t) + (n % 8 * dtype_bits(t) + 7) / 8;
}

std::string_view dtype_name(DType t);
// Parses "f32", "bf16", "f8e4m3", ... ; throws ConfigError naming the text otherwise.
DType parse_dtype(std::string_view name);

// A set of dtypes (what a device or kernel supports).
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> types) {
    for (DType t : types) bits_ |= bit(t);
  }
  constexpr bool contains(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr DTypeSet operator&(DTypeSet other) const { return from_bits(bits_ & other.bits_); }
  constexpr DTypeSet operator|(DTypeSet other) const { return from_bits(bits_ | other.bits_); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const DTypeSet&) const = default;

 private:
  static constexpr uint16_t bit(DType t) { return uint16_t(1u << static_cast<int>(t)); }
  static constexpr DTypeSet from_bits(uint16_t b) {
    DTypeSet s;
    s.bits_ = b;
    return s;
  }
  uint16_t bits_ = 0;
};

}  // namespace h2
