// Token datasets: loading by format, the vocabulary check and the train/validation split.
#include "train/data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <glob.h>

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

// Reads one file of a data set.
std::vector<int32_t> read_file(const std::string& path, DataFormat format, std::string_view where) {
  // Data files are read whole: a device (/dev/zero), a pipe or a folder would read forever or
  // make no sense.
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error))
    H2_THROW(ConfigError, "{}: '{}' is not a regular file (data files are read whole)", where,
             path);
  switch (format) {
    case DataFormat::bin:
      return read_token_file(path);
    case DataFormat::uint16:
      return read_uint16_file(path);
    case DataFormat::text:
      break;
  }
  if (has_token_file_header(path))
    H2_THROW(ConfigError,
             "{}: '{}' is an llm.c token file, which data.format text would read as bytes: set "
             "data.format: bin",
             where, path);
  if (std::filesystem::path(path).extension() == ".bin")
    H2_THROW(ConfigError,
             "{}: '{}' is named .bin but data.format is text (bytes as tokens): set data.format: "
             "bin for llm.c files (with a header) or uint16 for nanoGPT's headerless files",
             where, path);
  return ByteTokenizer().encode(read_text_file(path));
}

bool is_pattern(std::string_view entry) {
  return entry.find_first_of("*?[") != std::string_view::npos;
}

std::string trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

DataFormat parse_data_format(std::string_view name, std::string_view where) {
  if (name == "text") return DataFormat::text;
  if (name == "bin") return DataFormat::bin;
  if (name == "uint16") return DataFormat::uint16;
  H2_THROW(ConfigError, "{}: unknown data format '{}' (expected 'text', 'bin' or 'uint16')", where,
           name);
}

std::string_view data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::text:
      return "text";
    case DataFormat::bin:
      return "bin";
    case DataFormat::uint16:
      return "uint16";
  }
  return "?";
}

std::vector<std::string> expand_data_paths(std::string_view spec, std::string_view where) {
  std::vector<std::string> files;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t comma = spec.find(',', begin);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string entry = trimmed(spec.substr(begin, comma - begin));
    begin = comma + 1;
    if (entry.empty()) continue;
    // A file of that very name is the file, whatever its name holds ("data[1].txt").
    std::error_code error;
    if (is_pattern(entry) && !std::filesystem::is_regular_file(entry, error)) {
      glob_t found{};
      const int status = ::glob(entry.c_str(), GLOB_ERR, nullptr, &found);
      std::vector<std::string> matches(found.gl_pathv, found.gl_pathv + found.gl_pathc);
      ::globfree(&found);
      if (status == GLOB_NOMATCH || matches.empty())
        H2_THROW(ConfigError, "{}: pattern '{}' matches no file (working directory {})", where,
                 entry, std::filesystem::current_path().string());
      if (status != 0) H2_THROW(ConfigError, "{}: cannot read the folders of '{}'", where, entry);
      std::sort(matches.begin(), matches.end());
      for (std::string& match : matches)
        if (!std::filesystem::is_directory(match)) files.push_back(std::move(match));
      continue;
    }
    std::error_code ec;
    const auto status = std::filesystem::status(entry, ec);
    if (!std::filesystem::exists(status))
      H2_THROW(ConfigError, "{}: '{}': file not found (working directory {})", where, entry,
               std::filesystem::current_path().string());
    if (std::filesystem::is_directory(status))
      H2_THROW(ConfigError, "{}: '{}' is a directory; name its files or a pattern ('{}/*.bin')",
               where, entry, entry);
    files.push_back(entry);
  }
  if (files.empty()) H2_THROW(ConfigError, "{}: names no file", where);
  return files;
}

TokenDataset::TokenDataset(std::vector<int32_t> tokens, std::string source)
    : tokens_(std::move(tokens)), source_(std::move(source)) {
  if (!tokens_.empty()) max_id_ = *std::max_element(tokens_.begin(), tokens_.end());
}

TokenDataset TokenDataset::load(const std::string& spec, DataFormat format,
                                std::string_view where) {
  const std::vector<std::string> files = expand_data_paths(spec, where);
  std::vector<int32_t> tokens = read_file(files.front(), format, where);
  for (size_t i = 1; i < files.size(); ++i) {
    const std::vector<int32_t> more = read_file(files[i], format, where);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  std::string source = files.size() == 1 ? files.front()
                                         : fmt::format("{} ({} files, {} .. {})", spec,
                                                       files.size(), files.front(), files.back());
  return TokenDataset(std::move(tokens), std::move(source));
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

DataSplit TokenDataset::split_with(const TokenDataset& val, int64_t seq_len) const {
  if (seq_len < 1) H2_THROW(ConfigError, "{}: seq_len {} is not positive", source_, seq_len);
  for (const TokenDataset* part : {this, &val})
    if (part->size() < seq_len + 1)
      H2_THROW(ConfigError, "{}: {} tokens, fewer than one window of seq_len + 1 = {} tokens",
               part->source(), part->size(), seq_len + 1);
  return DataSplit{tokens(), val.tokens()};
}

}  // namespace h2::data
