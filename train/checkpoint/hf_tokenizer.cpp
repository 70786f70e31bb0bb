// Tokenizer files of Hugging Face folders (see hf_tokenizer.h).
#include "train/checkpoint/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_int.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte is one visible character.
std::vector<char32_t> byte_alphabet() {
  std::vector<char32_t> alphabet(256);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    alphabet[size_t(b)] = printable ? char32_t(b) : next++;
  }
  return alphabet;
}

std::string utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
  return out;
}

nlohmann::ordered_json byte_level(bool decoder) {
  nlohmann::ordered_json j;
  j["type"] = "ByteLevel";
  j["add_prefix_space"] = false;
  j["trim_offsets"] = !decoder;
  j["use_regex"] = false;
  return j;
}

}  // namespace

const std::vector<std::string>& hf_tokenizer_file_names() {
  static const std::vector<std::string> names = {"tokenizer.json", "tokenizer_config.json",
                                                 "special_tokens_map.json", "tokenizer.model"};
  return names;
}

std::string byte_level_tokenizer_json() {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  const std::vector<char32_t> alphabet = byte_alphabet();
  for (int b = 0; b < 256; ++b) vocab[utf8(alphabet[size_t(b)])] = b;
  nlohmann::ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  model["vocab"] = vocab;
  model["merges"] = nlohmann::ordered_json::array();
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = nlohmann::ordered_json::array();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level(false);
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level(true);
  j["model"] = model;
  return j.dump(2) + "\n";
}

std::string tokenizer_config_json(const config::ModelConfig& model) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  j["model_max_length"] = model.seq_len;
  j["clean_up_tokenization_spaces"] = false;
  return j.dump(2) + "\n";
}

int copy_tokenizer_files(const std::string& from, const std::string& to) {
  int copied = 0;
  for (const std::string& name : hf_tokenizer_file_names()) {
    const fs::path source = fs::path(from) / name;
    if (!fs::is_regular_file(source)) continue;
    std::error_code ec;
    fs::create_directories(to, ec);
    fs::copy_file(source, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) H2_THROW(Error, "cannot copy {} to {}: {}", source.string(), to, ec.message());
    ++copied;
  }
  return copied;
}

std::string run_tokenizer_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "tokenizer").string();
}

std::string kept_tokenizer_dir(const std::string& checkpoint_dir) {
  // Absolute first: "." (the checkpoint as the working directory) has no parent of its own; and
  // "run/step_000010/" names the folder too, though parent_path of it is the folder itself.
  fs::path checkpoint = fs::absolute(checkpoint_dir).lexically_normal();
  if (!checkpoint.has_filename()) checkpoint = checkpoint.parent_path();
  return run_tokenizer_dir(checkpoint.parent_path().string());
}

namespace {

// Decodes one UTF-8 code point at `i` (advancing it); invalid bytes come back as themselves.
char32_t next_code_point(const std::string& text, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char first = byte(i);
  int extra = first >= 0xF0 ? 3 : first >= 0xE0 ? 2 : first >= 0xC0 ? 1 : 0;
  if (i + size_t(extra) >= text.size()) extra = 0;  // truncated: the byte alone
  char32_t c = extra == 0 ? first : first & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) c = (c << 6) | (byte(i + size_t(k)) & 0x3F);
  i += size_t(extra) + 1;
  return c;
}

}  // namespace

TokenDecoder::TokenDecoder(const std::string& tokenizer_json) {
  std::ifstream in(tokenizer_json);
  if (!in) H2_THROW(ConfigError, "{}: cannot read the tokenizer", tokenizer_json);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    const nlohmann::json& vocab = j.at("model").at("vocab");
    if (!vocab.is_object()) H2_THROW(ConfigError, "{}: model.vocab is not a map", tokenizer_json);
    // Ids are whole numbers below 2^24 (the table is indexed by them; real vocabularies stop
    // far below), checked as untrusted JSON: json_int names the file, the piece and the value.
    auto place = [&](const std::string& piece, const nlohmann::json& id_json, const char* where) {
      const int64_t id =
          json_int(id_json, fmt::format("{}: {} id of '{}'", tokenizer_json, where, piece), 0,
                   (int64_t(1) << 24) - 1);
      if (size_t(id) >= pieces_.size()) pieces_.resize(size_t(id) + 1);
      pieces_[size_t(id)] = piece;
    };
    for (const auto& [piece, id] : vocab.items()) place(piece, id, "model.vocab");
    if (j.contains("added_tokens"))
      for (const auto& added : j["added_tokens"])
        place(added.at("content").get<std::string>(), added.at("id"), "added_tokens");
    const nlohmann::json& decoder = j.value("decoder", nlohmann::json());
    byte_level_ = decoder.is_object() && decoder.value("type", "") == "ByteLevel";
    if (decoder.is_object() && decoder.value("type", "") == "Sequence")
      for (const auto& step : decoder.value("decoders", nlohmann::json::array()))
        byte_level_ = byte_level_ || step.value("type", "") == "ByteLevel";
  } catch (const nlohmann::json::exception& e) {
    H2_THROW(ConfigError, "{}: not a tokenizers tokenizer.json: {}", tokenizer_json, e.what());
  }
  if (pieces_.empty()) H2_THROW(ConfigError, "{}: the vocabulary is empty", tokenizer_json);
}

std::string TokenDecoder::decode(int64_t id) const {
  if (id < 0 || size_t(id) >= pieces_.size()) return {};
  const std::string& piece = pieces_[size_t(id)];
  if (byte_level_) {
    static const std::vector<char32_t> alphabet = byte_alphabet();
    std::string bytes;
    for (size_t i = 0; i < piece.size();) {
      const char32_t c = next_code_point(piece, i);
      const auto at = std::find(alphabet.begin(), alphabet.end(), c);
      if (at == alphabet.end()) return piece;  // an added token written as plain text
      bytes += char(at - alphabet.begin());
    }
    return bytes;
  }
  if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>')
    return std::string(1, char(std::stoi(piece.substr(3, 2), nullptr, 16)));
  std::string text;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, "\u2581") == 0) {
      text += ' ';
      i += 3;
    } else {
      text += piece[i++];
    }
  }
  return text;
}

}  // namespace h2::checkpoint
