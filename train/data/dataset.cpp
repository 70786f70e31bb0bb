// Token datasets: loading by format, the vocabulary check and the train/validation split.
#include "train/data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "train/data/token_file.h"
#include "train/data/tokenizer.h"

namespace h2::data {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) H2_THROW(ConfigError, "{}: cannot open text data file: {}", path, std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) H2_THROW(ConfigError, "{}: reading the text data file failed", path);
  return text;
}

}  // namespace

DataFormat parse_data_format(std::string_view name, std::string_view where) {
  if (name == "text") return DataFormat::text;
  if (name == "bin") return DataFormat::bin;
  H2_THROW(ConfigError, "{}: unknown data format '{}' (expected 'text' or 'bin')", where, name);
}

std::string_view data_format_name(DataFormat format) {
  return format == DataFormat::text ? "text" : "bin";
}

TokenDataset::TokenDataset(std::vector<int32_t> tokens, std::string source)
    : tokens_(std::move(tokens)), source_(std::move(source)) {
  if (!tokens_.empty()) max_id_ = *std::max_element(tokens_.begin(), tokens_.end());
}

TokenDataset TokenDataset::load(const std::string& path, DataFormat format) {
  if (format == DataFormat::bin) return TokenDataset(read_token_file(path), path);
  return TokenDataset(ByteTokenizer().encode(read_text_file(path)), path);
}

void TokenDataset::check_vocab(int64_t vocab_size) const {
  if (vocab_size < 1)
    H2_THROW(ConfigError, "{}: vocab_size {} is not positive", source_, vocab_size);
  if (max_id_ < vocab_size &&
      std::none_of(tokens_.begin(), tokens_.end(), [](int32_t t) { return t < 0; }))
    return;
  auto bad = std::find_if(tokens_.begin(), tokens_.end(),
                          [&](int32_t t) { return t < 0 || t >= vocab_size; });
  H2_THROW(ConfigError,
           "{}: token id {} at position {} is outside the model's vocabulary [0, {}) (the largest "
           "id in the data is {}; raise model.vocab_size or use matching data)",
           source_, *bad, bad - tokens_.begin(), vocab_size, max_id_);
}

DataSplit TokenDataset::split(double val_fraction, int64_t seq_len) const {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    H2_THROW(ConfigError, "{}: val_fraction {} is outside [0, 1)", source_, val_fraction);
  if (seq_len < 1) H2_THROW(ConfigError, "{}: seq_len {} is not positive", source_, seq_len);
  const int64_t n = size();
  const auto n_val = static_cast<int64_t>(std::floor(double(n) * val_fraction));
  const int64_t n_train = n - n_val;
  const int64_t window = seq_len + 1;
  if (n_train < window)
    H2_THROW(
        ConfigError,
        "{}: {} tokens with val_fraction {} leave {} training tokens, fewer than one window of "
        "seq_len + 1 = {} tokens",
        source_, n, val_fraction, n_train, window);
  if (val_fraction > 0.0 && n_val < window)
    H2_THROW(ConfigError,
             "{}: {} tokens with val_fraction {} leave {} validation tokens, fewer than one window "
             "of seq_len + 1 = {} tokens (raise val_fraction or set it to 0 to skip evaluation)",
             source_, n, val_fraction, n_val, window);
  std::span<const int32_t> all(tokens_);
  return DataSplit{all.first(size_t(n_train)), all.subspan(size_t(n_train))};
}

}  // namespace h2::data
