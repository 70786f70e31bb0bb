// The llm.c .bin token format (write/read round trip, every header error names the file and the
// problem) and the byte tokenizer (round trip of every byte value, rejection of foreign ids).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/error.h"
#include "temp_dir.h"
#include "train/data/token_file.h"
#include "train/data/tokenizer.h"

namespace h2::data {
namespace {

using testing::TempDir;

// Expects fn to throw ConfigError whose message contains every one of parts.
template <typename Fn>
void expect_config_error(Fn fn, std::initializer_list<std::string_view> parts) {
  try {
    fn();
    ADD_FAILURE() << "no ConfigError thrown";
  } catch (const ConfigError& e) {
    for (std::string_view part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << part;
  }
}

// A header (magic, version, count) followed by `body_bytes` bytes.
std::string raw_file(int32_t magic, int32_t version, int32_t count, size_t body_bytes) {
  std::string bytes(size_t(kTokenFileHeaderBytes) + body_bytes, '\0');
  int32_t head[3] = {magic, version, count};
  std::memcpy(bytes.data(), head, sizeof(head));
  return bytes;
}

TEST(TokenFile, WriteReadRoundTrip) {
  TempDir dir;
  std::vector<int32_t> tokens = {0, 1, 255, 256, 50256, 65535, 7, 7};
  write_token_file(dir.file("t.bin"), tokens);
  EXPECT_EQ(std::filesystem::file_size(dir.file("t.bin")),
            uint64_t(kTokenFileHeaderBytes + 2 * tokens.size()));
  EXPECT_EQ(read_token_file(dir.file("t.bin")), tokens);

  std::vector<int32_t> many(100000);
  std::iota(many.begin(), many.end(), 0);
  for (auto& t : many) t %= 65536;
  write_token_file(dir.file("many.bin"), many);
  EXPECT_EQ(read_token_file(dir.file("many.bin")), many);

  write_token_file(dir.file("empty.bin"), {});
  EXPECT_TRUE(read_token_file(dir.file("empty.bin")).empty());
}

TEST(TokenFile, HeaderLayoutMatchesLlmC) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), std::vector<int32_t>{3, 4, 5});
  std::ifstream in(dir.file("t.bin"), std::ios::binary);
  std::vector<int32_t> header(kTokenFileHeaderInts);
  in.read(reinterpret_cast<char*>(header.data()), kTokenFileHeaderBytes);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 3);
  for (int i = 3; i < kTokenFileHeaderInts; ++i) EXPECT_EQ(header[size_t(i)], 0) << i;
  uint16_t body[3];
  in.read(reinterpret_cast<char*>(body), sizeof(body));
  EXPECT_EQ(body[0], 3);
  EXPECT_EQ(body[2], 5);
}

TEST(TokenFile, MissingFile) {
  TempDir dir;
  std::string path = dir.file("absent.bin");
  expect_config_error([&] { read_token_file(path); }, {path, "cannot open"});
}

TEST(TokenFile, ShorterThanHeader) {
  TempDir dir;
  std::string path = dir.write("short.bin", std::string(100, 'x'));
  expect_config_error([&] { read_token_file(path); }, {path, "100 bytes", "1024-byte header"});
}

TEST(TokenFile, BadMagic) {
  TempDir dir;
  std::string path = dir.write("data.bin", raw_file(12345, 1, 0, 0));
  expect_config_error(
      [&] { read_token_file(path); },
      {path + ": magic 12345 is not 20240520 or 20240801 (not an llm.c .bin token file; "
              "nanoGPT's headerless uint16 files are data.format: uint16)"});
}

TEST(TokenFile, BadVersion) {
  TempDir dir;
  std::string path = dir.write("v2.bin", raw_file(kTokenFileMagic, 2, 4, 8));
  expect_config_error([&] { read_token_file(path); }, {path, "version 2 is not supported"});
}

TEST(TokenFile, NegativeCount) {
  TempDir dir;
  std::string path = dir.write("neg.bin", raw_file(kTokenFileMagic, 1, -5, 0));
  expect_config_error([&] { read_token_file(path); }, {path, "declares -5 tokens"});
}

TEST(TokenFile, TruncatedBody) {
  TempDir dir;
  std::string path = dir.write("trunc.bin", raw_file(kTokenFileMagic, 1, 1000, 1996));
  expect_config_error([&] { read_token_file(path); },
                      {path, "declares 1000 tokens but the file holds 998"});
}

TEST(TokenFile, OversizedAndOddBody) {
  TempDir dir;
  std::string big = dir.write("big.bin", raw_file(kTokenFileMagic, 1, 3, 10));
  expect_config_error([&] { read_token_file(big); },
                      {big, "declares 3 tokens but the file holds 5"});
  std::string odd = dir.write("odd.bin", raw_file(kTokenFileMagic, 1, 3, 7));
  expect_config_error([&] { read_token_file(odd); }, {odd, "7 bytes after the header", "odd"});
}

TEST(TokenFile, WriterRejectsTokensOutsideUint16) {
  TempDir dir;
  std::vector<int32_t> tokens = {1, 2, 70000};
  try {
    write_token_file(dir.file("bad.bin"), tokens);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 70000 at position 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(write_token_file(dir.file("neg.bin"), std::vector<int32_t>{-1}), Error);
}

TEST(ByteTokenizer, RoundTripsEveryByteValue) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  std::string all(256, '\0');
  for (int b = 0; b < 256; ++b) all[size_t(b)] = char(b);
  std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[size_t(b)], b);  // >= 128 not sign-extended
  EXPECT_EQ(tok.decode(ids), all);

  std::string utf8 = "na\xc3\xafve caf\xc3\xa9 \xe2\x82\xac";  // "naïve café €"
  EXPECT_EQ(tok.decode(tok.encode(utf8)), utf8);
  EXPECT_EQ(tok.encode("\xc3")[0], 0xc3);
  EXPECT_EQ(tok.decode_token(0xe2), '\xe2');
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(ByteTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  ByteTokenizer tok;
  std::vector<int32_t> ids = {104, 105, 256};
  try {
    tok.decode(ids);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 256 at position 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tok.decode_token(-1), Error);
}

}  // namespace
}  // namespace h2::data
