// A token dataset: the whole token stream of one file or of a shard set read in order (plain text
// through the byte tokenizer, llm.c .bin files, nanoGPT's headerless uint16 files), with the
// train/validation split and the vocabulary check the trainer needs. The tokens are held in
// memory as int32 (4 bytes per token).
// Invariants: a TokenDataset owns its tokens and never changes them; the spans a DataSplit holds
// point into it, so the dataset must outlive every split, sampler and eval iterator made from it.
// The validation split is the last floor(n * val_fraction) tokens, the training split the rest, so
// the two never overlap and a fixed file and fraction always give the same split.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace h2::data {

enum class DataFormat { text, bin, uint16 };

// "text", "bin" or "uint16"; otherwise ConfigError naming the value, `where` (e.g. "data.format in
// run.yaml:7") and the accepted names.
DataFormat parse_data_format(std::string_view name, std::string_view where = "data.format");
std::string_view data_format_name(DataFormat format);

// The files a data path names, in reading order: `spec` is a file, a glob pattern (its matches
// sorted by name, as llm.c's shard names sort in order) or several of either separated by commas.
// ConfigError naming `where` and the entry when a file is missing, a pattern matches nothing or
// an entry is a directory.
std::vector<std::string> expand_data_paths(std::string_view spec, std::string_view where);

struct DataSplit {
  std::span<const int32_t> train;
  std::span<const int32_t> val;  // empty when val_fraction is 0
};

class TokenDataset {
 public:
  // `source` names where the tokens came from (a path) and prefixes every error message.
  TokenDataset(std::vector<int32_t> tokens, std::string source);

  // Reads the files `spec` names (expand_data_paths) in the given format, concatenated in order;
  // ConfigError naming the file if one is missing or malformed. Text refuses a file that starts
  // with an llm.c header or is named *.bin (tokens read as bytes would train on nonsense).
  static TokenDataset load(const std::string& spec, DataFormat format,
                           std::string_view where = "data.path");

  std::span<const int32_t> tokens() const { return tokens_; }
  int64_t size() const { return int64_t(tokens_.size()); }
  const std::string& source() const { return source_; }

  // Largest token id in the stream (-1 if empty): the smallest vocab_size a model may have.
  int32_t max_token_id() const { return max_id_; }

  // ConfigError unless every id is in [0, vocab_size); names the file, the first offending id and
  // its position, and the model's vocab_size.
  void check_vocab(int64_t vocab_size) const;

  // Splits off the last floor(size * val_fraction) tokens for validation. ConfigError unless
  // val_fraction is in [0, 1), seq_len >= 1, the training split holds at least one window of
  // seq_len + 1 tokens and (if val_fraction > 0) so does the validation split; the message names
  // the file, val_fraction, seq_len and the token counts.
  DataSplit split(double val_fraction, int64_t seq_len) const;

  // This whole dataset for training and all of `val` for validation (a separate data.val_path);
  // ConfigError unless each holds a window of seq_len + 1 tokens.
  DataSplit split_with(const TokenDataset& val, int64_t seq_len) const;

 private:
  std::vector<int32_t> tokens_;
  std::string source_;
  int32_t max_id_ = -1;
};

}  // namespace h2::data
