// The learning bar of the trainer tests: the byte unigram entropy of the data a run trains and
// evaluates on. A model that ignores context can at best predict each byte's overall frequency,
// which costs that entropy (in nats) per token on average; a loss clearly below it proves the
// model uses the preceding tokens. Computed here in double precision from the same split the
// trainer uses (train/data/dataset.h), never a constant that a change of data would silently
// invalidate.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "train/config/config.h"
#include "train/data/dataset.h"

namespace h2::train::test {

// How far below the unigram entropy a loss must end to count as using context (nats). On the
// default text (GPL-3) the unigram entropy is 3.17 and the entropy of a byte given the one
// before it 2.42, so knowing a single previous byte is worth 0.75: the margin asks for 0.3.
constexpr double kContextMargin = 0.3;

// Shannon entropy in nats of the token frequencies of `tokens` (byte-level: ids 0-255).
inline double unigram_entropy(std::span<const int32_t> tokens) {
  std::array<double, 256> count{};
  for (int32_t t : tokens) count.at(size_t(t)) += 1;
  double entropy = 0;
  for (double c : count)
    if (c > 0) entropy -= c / double(tokens.size()) * std::log(c / double(tokens.size()));
  return entropy;
}

// Conditional entropy in nats of a token given the one before it, from the pair frequencies of
// `tokens`: on these tokens no model that sees only the current token (a bigram model, which is
// what a transformer without working attention is) has a lower average loss.
inline double bigram_entropy(std::span<const int32_t> tokens) {
  std::vector<double> pairs(256 * 256, 0.0), first(256, 0.0);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    pairs.at(size_t(tokens[i]) * 256 + size_t(tokens[i + 1])) += 1;
    first.at(size_t(tokens[i])) += 1;
  }
  const double n = double(tokens.size() - 1);
  double entropy = 0;
  for (size_t a = 0; a < 256; ++a)
    for (size_t b = 0; b < 256; ++b)
      if (const double c = pairs[a * 256 + b]; c > 0) entropy -= c / n * std::log(c / first[a]);
  return entropy;
}

struct UnigramBounds {
  double train = 0;         // of the training split
  double val = 0;           // of the validation split: no context-free model scores below it there
  double train_bigram = 0;  // of the training split given the previous token
};

// The bounds of a text file split as the trainer splits it (val_fraction, seq_len).
inline UnigramBounds unigram_bounds(const std::string& text_path, double val_fraction,
                                    int64_t seq_len) {
  const data::TokenDataset dataset = data::TokenDataset::load(text_path, data::DataFormat::text);
  const data::DataSplit split = dataset.split(val_fraction, seq_len);
  return {unigram_entropy(split.train), unigram_entropy(split.val), bigram_entropy(split.train)};
}

// The bounds of the splits a config trains and evaluates on.
inline UnigramBounds unigram_bounds(const config::TrainConfig& c) {
  return unigram_bounds(c.data.path, c.data.val_fraction, c.model.seq_len);
}

}  // namespace h2::train::test
