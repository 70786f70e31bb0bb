// Window sampler and evaluation windows (see sampler.h). The random stream is SplitMix64 evaluated
// at a counter: z = mix(seed) + (counter + 1) * golden, x = mix(z). SplitMix64 passes BigCrush, and
// pre-mixing the seed keeps streams of nearby seeds unrelated. The map to [0, n) is Lemire's
// multiply-shift; the rare draws that would bias it (probability < n / 2^64) are rejected and
// redrawn from a re-mixed value, so every start is exactly equally likely.
#include "train/data/sampler.h"

#include <algorithm>

#include "core/error.h"

namespace h2::data {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_shape(std::span<const int32_t> tokens, int64_t batch_size, int64_t seq_len,
                 const char* what) {
  if (batch_size < 1) H2_THROW(ConfigError, "{}: batch_size {} is not positive", what, batch_size);
  if (seq_len < 1) H2_THROW(ConfigError, "{}: seq_len {} is not positive", what, seq_len);
  if (int64_t(tokens.size()) < seq_len + 1)
    H2_THROW(ConfigError, "{}: {} tokens are fewer than one window of seq_len + 1 = {} tokens",
             what, tokens.size(), seq_len + 1);
}

void check_buffers(std::span<int32_t> inputs, std::span<int32_t> targets, int64_t need) {
  H2_CHECK(int64_t(inputs.size()) >= need && int64_t(targets.size()) >= need,
           "batch buffers hold {} inputs and {} targets; B*T = {} needed", inputs.size(),
           targets.size(), need);
}

void copy_window(std::span<const int32_t> tokens, int64_t start, int64_t seq_len, int32_t* inputs,
                 int32_t* targets) {
  const int32_t* src = tokens.data() + start;
  std::copy(src, src + seq_len, inputs);
  std::copy(src + 1, src + seq_len + 1, targets);
}

}  // namespace

uint64_t counter_uniform(uint64_t seed, uint64_t counter, uint64_t n) {
  H2_CHECK(n > 0, "empty range for draw {}", counter);
  uint64_t x = mix64(mix64(seed) + (counter + 1) * kGolden);
  unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      x = mix64(x ^ 0xD1B54A32D192ED03ull);
      m = static_cast<unsigned __int128>(x) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

WindowSampler::WindowSampler(std::span<const int32_t> tokens, int64_t batch_size, int64_t seq_len,
                             uint64_t seed)
    : tokens_(tokens), batch_(batch_size), seq_len_(seq_len), seed_(seed) {
  check_shape(tokens, batch_size, seq_len, "training sampler");
  num_windows_ = int64_t(tokens.size()) - seq_len;
}

int64_t WindowSampler::window_start(uint64_t batch, int64_t row) const {
  const uint64_t counter = batch * uint64_t(batch_) + uint64_t(row);
  return int64_t(counter_uniform(seed_, counter, uint64_t(num_windows_)));
}

void WindowSampler::next(std::span<int32_t> inputs, std::span<int32_t> targets) {
  check_buffers(inputs, targets, batch_ * seq_len_);
  for (int64_t r = 0; r < batch_; ++r)
    copy_window(tokens_, window_start(position_, r), seq_len_, inputs.data() + r * seq_len_,
                targets.data() + r * seq_len_);
  ++position_;
}

Batch WindowSampler::next() {
  Batch batch{std::vector<int32_t>(size_t(batch_ * seq_len_)),
              std::vector<int32_t>(size_t(batch_ * seq_len_))};
  next(batch.inputs, batch.targets);
  return batch;
}

EvalWindows::EvalWindows(std::span<const int32_t> tokens, int64_t batch_size, int64_t seq_len)
    : tokens_(tokens), batch_(batch_size), seq_len_(seq_len) {
  check_shape(tokens, batch_size, seq_len, "evaluation windows");
  num_windows_ = (int64_t(tokens.size()) - 1) / seq_len;
}

int64_t EvalWindows::next(std::span<int32_t> inputs, std::span<int32_t> targets) {
  check_buffers(inputs, targets, batch_ * seq_len_);
  const int64_t rows = std::min(batch_, num_windows_ - next_window_);
  for (int64_t r = 0; r < rows; ++r)
    copy_window(tokens_, (next_window_ + r) * seq_len_, seq_len_, inputs.data() + r * seq_len_,
                targets.data() + r * seq_len_);
  next_window_ += rows;
  return rows;
}

}  // namespace h2::data
