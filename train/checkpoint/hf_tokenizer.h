// Tokenizer files of Hugging Face model folders, so an exported folder works with AutoTokenizer
// and pipeline("text-generation") at once:
// - H2's byte-level vocabulary (data.format text: token id = byte value) as a `tokenizers`
//   tokenizer.json: a BPE model over GPT-2's byte-to-unicode alphabet with no merges, ByteLevel
//   pre-tokenizer and decoder without regex splitting or prefix space, so encode(text) is the
//   text's bytes and decode is their inverse; with a tokenizer_config.json naming
//   PreTrainedTokenizerFast.
// - The tokenizer files of an imported folder (tokenizer.json, tokenizer_config.json,
//   special_tokens_map.json, tokenizer.model), kept beside the checkpoints and copied on export.
#pragma once

#include <string>
#include <vector>

#include "train/config/config.h"

namespace h2::checkpoint {

// The files copy_tokenizer_files() carries, in a Hugging Face folder.
const std::vector<std::string>& hf_tokenizer_file_names();

// tokenizer.json of the byte-level vocabulary (ids 0..255 are the bytes).
std::string byte_level_tokenizer_json();
// tokenizer_config.json for it (or for copied files without one): PreTrainedTokenizerFast,
// model_max_length = seq_len.
std::string tokenizer_config_json(const config::ModelConfig& model);

// Copies the tokenizer files present in `from` into `to` (created if needed); returns how many.
int copy_tokenizer_files(const std::string& from, const std::string& to);

// The folder beside a run's checkpoints where `h2 import` keeps the source's tokenizer files, from
// the run's folder (checkpoint.dir) or from one of its checkpoints (step_NNNNNN, a trailing '/'
// or not). Import makes it even when the source had no tokenizer files: its presence says the
// model is imported, so its ids are not bytes whatever data.format the run read.
std::string run_tokenizer_dir(const std::string& run_dir);
std::string kept_tokenizer_dir(const std::string& checkpoint_dir);

// Token ids back to bytes with a tokenizer.json's vocabulary (model.vocab and added_tokens):
// byte-level vocabularies (GPT-2, Llama 3: a ByteLevel decoder) map each character of a token
// back to its byte; SentencePiece-style ones (Llama 2) turn U+2581 into a space and <0xNN> into
// byte NN. Encoding text needs the tokenizer's merges and pre-tokenizer, which H2 does not
// implement: prompts for such vocabularies are given as ids.
class TokenDecoder {
 public:
  // ConfigError naming the file when it cannot be read or has no vocabulary.
  explicit TokenDecoder(const std::string& tokenizer_json);
  // The bytes of one token; empty for an id the vocabulary lacks.
  std::string decode(int64_t id) const;

 private:
  std::vector<std::string> pieces_;  // by id
  bool byte_level_ = false;
};

}  // namespace h2::checkpoint
