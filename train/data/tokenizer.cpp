// Byte-level tokenizer: bytes <-> ids 0..255 (see tokenizer.h).
#include "train/data/tokenizer.h"

#include "core/error.h"

namespace h2::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    H2_CHECK(ids[i] >= 0 && ids[i] < kVocabSize,
             "token id {} at position {} is outside the byte tokenizer's vocabulary [0, {})",
             ids[i], i, kVocabSize);
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

char ByteTokenizer::decode_token(int32_t id) const {
  H2_CHECK(id >= 0 && id < kVocabSize,
           "token id {} is outside the byte tokenizer's vocabulary [0, {})", id, kVocabSize);
  return static_cast<char>(static_cast<unsigned char>(id));
}

}  // namespace h2::data
