// Byte-level tokenizer: every byte of a text is one token, id = the byte's unsigned value, so the
// vocabulary is exactly 256 ids and any byte string round-trips (UTF-8 or not). Used for plain
// text training data and by `h2 generate` to turn sampled ids back into text.
// Invariant: encode() yields ids in [0, 256); decode() rejects anything else, naming the position.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace h2::data {

class ByteTokenizer {
 public:
  static constexpr int32_t kVocabSize = 256;

  int32_t vocab_size() const { return kVocabSize; }

  // One token per byte, ids 0..255 (bytes >= 128 are not sign-extended).
  std::vector<int32_t> encode(std::string_view text) const;

  // Inverse of encode(); throws h2::Error naming the position and id of an id outside [0, 256).
  std::string decode(std::span<const int32_t> ids) const;

  // One id to its byte, for streaming generation; throws h2::Error if id is outside [0, 256).
  char decode_token(int32_t id) const;
};

}  // namespace h2::data
