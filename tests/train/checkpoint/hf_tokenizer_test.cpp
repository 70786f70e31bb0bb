// Tokenizer files: the byte-level tokenizer.json maps every byte to its own id (GPT-2's alphabet:
// printable Latin-1 as itself, the other 68 bytes from U+0100 in byte order) and decodes back to
// the bytes; a SentencePiece-style vocabulary decodes U+2581 as a space and <0xNN> as byte NN;
// tokenizer files are copied only where present.
#include "train/checkpoint/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace h2::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(HfTokenizer, ByteLevelVocabularyIsTheBytesInOrder) {
  const nlohmann::json j = nlohmann::json::parse(byte_level_tokenizer_json());
  const nlohmann::json& vocab = j["model"]["vocab"];
  ASSERT_EQ(vocab.size(), 256u);
  EXPECT_EQ(vocab["A"], 65);        // printable ASCII is itself
  EXPECT_EQ(vocab["\u0120"], 32);   // space: the 33rd non-printable byte -> U+0100 + 32
  EXPECT_EQ(vocab["\u0100"], 0);    // byte 0 is the first of the remapped ones
  EXPECT_EQ(vocab["\u00ff"], 255);  // printable Latin-1
  EXPECT_EQ(vocab["\u0143"], 173);  // soft hyphen (0xAD), the last remapped byte: U+0100 + 67
  EXPECT_TRUE(j["model"]["merges"].empty());
  EXPECT_EQ(j["pre_tokenizer"]["use_regex"], false);

  const fs::path dir = fresh_dir("h2_hf_tokenizer_bytes");
  const TokenDecoder decoder(write(dir / "tokenizer.json", byte_level_tokenizer_json()));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(decoder.decode(b), std::string(1, char(b))) << b;
  EXPECT_EQ(decoder.decode(256), "");
}

TEST(HfTokenizer, SentencePieceStylePiecesDecodeToText) {
  nlohmann::json j;
  j["model"]["type"] = "BPE";
  j["model"]["vocab"] = {{"<unk>", 0}, {"<0x0A>", 1}, {"\u2581the", 2}, {"re", 3}};
  j["added_tokens"] = {{{"id", 4}, {"content", "<|end|>"}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "Replace"}}, {{"type", "ByteFallback"}}}}};
  const fs::path dir = fresh_dir("h2_hf_tokenizer_sp");
  const TokenDecoder decoder(write(dir / "tokenizer.json", j.dump()));
  EXPECT_EQ(decoder.decode(2) + decoder.decode(3) + decoder.decode(1), " there\n");
  EXPECT_EQ(decoder.decode(4), "<|end|>");
  EXPECT_THROW(TokenDecoder(write(dir / "bad.json", "{}")), ConfigError);
}

// Ids are untrusted JSON: a fraction, a number beyond int64, a negative id or one past the table's
// bound is refused with the file, the piece and the value named (not truncated or cast).
TEST(HfTokenizer, BadIdsAreRefusedByName) {
  const fs::path dir = fresh_dir("h2_hf_tokenizer_bad_ids");
  for (const nlohmann::json& bad : {nlohmann::json(1.5), nlohmann::json(1e300), nlohmann::json(-1),
                                    nlohmann::json(int64_t(1) << 24), nlohmann::json("7")}) {
    nlohmann::json j;
    j["model"]["vocab"] = {{"ok", 0}, {"odd", bad}};
    const std::string path = write(dir / "tokenizer.json", j.dump());
    try {
      TokenDecoder decoder(path);
      ADD_FAILURE() << "id " << bad.dump() << " accepted";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find("model.vocab id of 'odd'"), std::string::npos) << what;
    }
  }
  nlohmann::json j;
  j["model"]["vocab"] = {{"ok", 0}};
  j["added_tokens"] = {{{"id", 2.25}, {"content", "<|end|>"}}};
  EXPECT_THROW(TokenDecoder(write(dir / "added.json", j.dump())), ConfigError);
}

TEST(HfTokenizer, CopiesOnlyTheTokenizerFilesPresent) {
  const fs::path from = fresh_dir("h2_hf_tokenizer_from"), to = fs::temp_directory_path() / "h2_t";
  fs::remove_all(to);
  write(from / "tokenizer.json", "{}");
  write(from / "special_tokens_map.json", "{}");
  write(from / "config.json", "{}");
  EXPECT_EQ(copy_tokenizer_files(from.string(), to.string()), 2);
  EXPECT_TRUE(fs::exists(to / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(to / "config.json"));
  EXPECT_EQ(copy_tokenizer_files(fresh_dir("h2_hf_tokenizer_empty").string(), to.string()), 0);
}

// The kept tokenizer sits beside the run's checkpoints, whichever way the checkpoint is named
// (a shell's completion adds the trailing '/', which once made it the checkpoint folder itself).
TEST(HfTokenizer, TheKeptTokenizerIsBesideTheRunWhateverTheCheckpointPathsForm) {
  const std::string want = (fs::current_path() / "runs" / "a" / "tokenizer").string();
  EXPECT_EQ(kept_tokenizer_dir("runs/a/step_000010"), want);
  EXPECT_EQ(kept_tokenizer_dir("runs/a/step_000010/"), want);
  EXPECT_EQ(kept_tokenizer_dir("runs/a/./step_000010//"), want);
  EXPECT_EQ(kept_tokenizer_dir("runs/a/step_000010/."), want);
  // The checkpoint as the working directory ("h2 export ." from inside it).
  const fs::path step = fresh_dir("h2_kept_tokenizer_run") / "step_000010";
  fs::create_directories(step);
  const fs::path before = fs::current_path();
  fs::current_path(step);
  EXPECT_EQ(kept_tokenizer_dir("."), (step.parent_path() / "tokenizer").string());
  fs::current_path(before);
  EXPECT_EQ(run_tokenizer_dir("runs/a"), "runs/a/tokenizer");
}

}  // namespace
}  // namespace h2::checkpoint
