// RoPE cos/sin tables (rope_tables.h): made in double by angle addition and rounded to float,
// kept per shape.
#include "backends/cpu/kernels/rope_tables.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/cpu_parallel.h"

namespace h2::cpu {
namespace {

// Positions per table block: libm gives cos and sin of each block's first angle, the others
// follow by one angle addition with the exact steps k * freq (k < kStep), all in double.
constexpr int64_t kStep = 32;

RopeTable make_table(const RopeTableKey& key) {
  const int64_t seq = key.seq, half = key.dim / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[size_t(i)] = rope_inv_freq(i, key.dim, key.theta, key.scaling);
  RopeTable table{std::vector<float>(size_t(seq * half)), std::vector<float>(size_t(seq * half))};
  const int64_t steps = std::min(kStep, seq), blocks = ceil_div(seq, kStep);
  const auto step_floats = static_cast<size_t>(steps * half);
  std::vector<double> step_cos(step_floats), step_sin(step_floats);
  for (int64_t k = 0; k < steps; ++k)
    for (int64_t i = 0; i < half; ++i) {
      step_cos[size_t(k * half + i)] = std::cos(double(k) * freq[size_t(i)]);
      step_sin[size_t(k * half + i)] = std::sin(double(k) * freq[size_t(i)]);
    }
  parallel_for(blocks, kStep * half * 4 + half * 40, [&](int64_t b0, int64_t b1) {
    std::vector<double> base_cos(static_cast<size_t>(half)), base_sin(static_cast<size_t>(half));
    for (int64_t b = b0; b < b1; ++b) {
      const double pos = double(key.offset + b * kStep);
      for (int64_t i = 0; i < half; ++i) {
        base_cos[size_t(i)] = std::cos(pos * freq[size_t(i)]);
        base_sin[size_t(i)] = std::sin(pos * freq[size_t(i)]);
      }
      for (int64_t k = 0; k < std::min(kStep, seq - b * kStep); ++k) {
        const double *sc = step_cos.data() + k * half, *ss = step_sin.data() + k * half;
        float* ct = table.cos_t.data() + (b * kStep + k) * half;
        float* st = table.sin_t.data() + (b * kStep + k) * half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          ct[i] = float(base_cos[size_t(i)] * sc[i] - base_sin[size_t(i)] * ss[i]);
          st[i] = float(base_sin[size_t(i)] * sc[i] + base_cos[size_t(i)] * ss[i]);
        }
      }
    }
  });
  return table;
}

}  // namespace

std::shared_ptr<const RopeTable> RopeTables::get(const RopeTableKey& key) {
  std::lock_guard lock(mutex_);
  for (const auto& [kept, table] : tables_)
    if (kept == key) return table;
  // Generation's growing offsets would grow the cache without end: the oldest table goes.
  if (tables_.size() == kMaxTables) tables_.erase(tables_.begin());
  tables_.emplace_back(key, std::make_shared<const RopeTable>(make_table(key)));
  return tables_.back().second;
}

}  // namespace h2::cpu
