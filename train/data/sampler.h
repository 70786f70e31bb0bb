// Reproducible, resumable batches of training windows, and the fixed-order evaluation windows.
//
// WindowSampler: batch k, row r uses the window starting at uniform(seed, k * B + r) in
// [0, n - T), giving inputs tokens[s, s+T) and targets tokens[s+1, s+T+1). The draw is
// counter-based (SplitMix64 at a counter, range mapped by Lemire's multiply-shift with exact
// rejection, all implemented here), so the batches depend only on (tokens, B, T, seed) and the
// batch index: not on the platform's <random> distributions, and seek(k) is O(1). A run resumed
// with seek(position()) draws exactly the batches the uninterrupted run would have drawn.
//
// EvalWindows: the validation split cut into floor((n - 1) / T) non-overlapping windows in order
// (window w: inputs [wT, wT+T), targets [wT+1, wT+T+1)), B per batch, the last batch possibly
// short. Every target position 1..W*T is scored exactly once per pass; the tail that cannot fill a
// window (fewer than T tokens) is not scored.
//
// Both hold a span into tokens they do not own: the TokenDataset must outlive them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace h2::data {

// Uniform integer in [0, n) for draw number `counter` of stream `seed`. Exposed for tests.
uint64_t counter_uniform(uint64_t seed, uint64_t counter, uint64_t n);

struct Batch {
  std::vector<int32_t> inputs;   // B*T, row-major (B, T)
  std::vector<int32_t> targets;  // B*T, inputs shifted left by one token
};

class WindowSampler {
 public:
  // Throws ConfigError unless batch_size >= 1, seq_len >= 1 and tokens holds >= seq_len + 1.
  WindowSampler(std::span<const int32_t> tokens, int64_t batch_size, int64_t seq_len,
                uint64_t seed);

  // Fills the next batch (inputs and targets must each hold B*T ints) and advances position().
  void next(std::span<int32_t> inputs, std::span<int32_t> targets);
  Batch next();

  // Start offset of row `row` of batch `batch` (what next() uses); does not move the position.
  int64_t window_start(uint64_t batch, int64_t row) const;

  // Batches drawn so far: the whole state to save in a checkpoint besides (seed, B, T).
  uint64_t position() const { return position_; }
  void seek(uint64_t position) { position_ = position; }

  int64_t batch_size() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_windows() const { return num_windows_; }  // distinct start offsets: n - T

 private:
  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t seq_len_;
  int64_t num_windows_;
  uint64_t seed_;
  uint64_t position_ = 0;
};

class EvalWindows {
 public:
  // Throws ConfigError unless batch_size >= 1, seq_len >= 1 and tokens holds >= seq_len + 1.
  EvalWindows(std::span<const int32_t> tokens, int64_t batch_size, int64_t seq_len);

  // Fills up to B windows (buffers must hold B*T ints each) and returns how many rows it filled:
  // B, fewer on the last batch, 0 once the pass is over (then call reset() for another pass).
  int64_t next(std::span<int32_t> inputs, std::span<int32_t> targets);
  void reset() { next_window_ = 0; }

  int64_t num_windows() const { return num_windows_; }
  int64_t num_batches() const { return (num_windows_ + batch_ - 1) / batch_; }
  int64_t batch_size() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t seq_len_;
  int64_t num_windows_;
  int64_t next_window_ = 0;
};

}  // namespace h2::data
