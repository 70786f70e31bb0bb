// The cos/sin tables of rotary position embedding, made once per shape and kept in the device's
// KernelContext. Making one takes about a thousand libm calls in double, most on one thread; a
// training step asks for the same table (forward and backward) in every layer, and making it
// was about 60% of rope_fwd's and rope_bwd's time: 26.5 and 21.5 us per call in tiny's f32
// step on the AVX2 path, 9.3 and 9.2 us with the tables kept.
// Glossary: T positions, D head dim, half = D / 2 pairs; row t of a table serves position
// offset + t.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/rope_frequencies.h"

namespace h2::cpu {

// What a table is made for; every field decides its values.
struct RopeTableKey {
  int64_t seq = 0, dim = 0, offset = 0;
  double theta = 0;
  RopeScaling scaling;
  bool operator==(const RopeTableKey&) const = default;
};

// cos_t, sin_t: (T, half) = cos and sin of (offset + t) * inv_freq[i], rounded to float; the
// inverse rotation negates sin where it reads it.
struct RopeTable {
  std::vector<float> cos_t, sin_t;
};

// Host memory outside the device's pool: at most kMaxTables tables, T * D floats each.
class RopeTables {
 public:
  // The table for `key`, made on first use (threaded over blocks of positions). Safe from several
  // threads; a table stays valid for as long as its holder keeps it.
  std::shared_ptr<const RopeTable> get(const RopeTableKey& key);

 private:
  static constexpr size_t kMaxTables = 32;  // a model asks for one per sequence length
  std::mutex mutex_;
  std::vector<std::pair<RopeTableKey, std::shared_ptr<const RopeTable>>> tables_;  // oldest first
};

}  // namespace h2::cpu
