// Datasets: loading text, llm.c .bin (uint16 and uint32) and nanoGPT uint16 files, shard sets by
// pattern and list in sorted order, refusing token files read as text, the format names, the
// vocabulary check, the train/validation split (sizes, order, rejected fractions and too-small
// splits, a separate validation set) and the default corpus that must exist on a fresh machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "temp_dir.h"
#include "train/data/dataset.h"
#include "train/data/default_data.h"
#include "train/data/token_file.h"

namespace h2::data {
namespace {

using testing::TempDir;

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError thrown";
  return "";
}

#define EXPECT_HAS(text, part)                    \
  EXPECT_NE((text).find(part), std::string::npos) \
      << "message: " << (text) << "\nmissing: " << (part)

TokenDataset iota_dataset(int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 0);
  return TokenDataset(std::move(tokens), "iota");
}

TEST(Dataset, LoadsTextAndBinFormats) {
  TempDir dir;
  std::string text_path = dir.write("a.txt", "hi\xff");
  TokenDataset text = TokenDataset::load(text_path, DataFormat::text);
  EXPECT_EQ(std::vector<int32_t>(text.tokens().begin(), text.tokens().end()),
            (std::vector<int32_t>{'h', 'i', 255}));
  EXPECT_EQ(text.source(), text_path);
  EXPECT_EQ(text.max_token_id(), 255);

  std::vector<int32_t> ids = {50256, 3, 17};
  write_token_file(dir.file("b.bin"), ids);
  TokenDataset bin = TokenDataset::load(dir.file("b.bin"), DataFormat::bin);
  EXPECT_EQ(bin.size(), 3);
  EXPECT_EQ(bin.max_token_id(), 50256);
  EXPECT_EQ(TokenDataset({}, "empty").max_token_id(), -1);

  std::string missing = dir.file("missing.txt");
  std::string msg = message_of([&] { TokenDataset::load(missing, DataFormat::text); });
  EXPECT_HAS(msg, missing);
  // A text file read as .bin fails on the header, naming the file.
  msg = message_of([&] { TokenDataset::load(text_path, DataFormat::bin); });
  EXPECT_HAS(msg, text_path);
}

// Tokens as raw little-endian bytes of `width` bytes each, after an optional llm.c header.
std::string raw_tokens(const std::vector<uint32_t>& ids, int width, int32_t magic = 0,
                       int32_t version = 0) {
  std::string bytes;
  if (magic != 0) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = int32_t(ids.size());
    bytes.append(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  }
  for (uint32_t id : ids) bytes.append(reinterpret_cast<const char*>(&id), size_t(width));
  return bytes;
}

std::vector<int32_t> ids_of(const TokenDataset& d) {
  return std::vector<int32_t>(d.tokens().begin(), d.tokens().end());
}

TEST(Dataset, ReadsShardSetsInSortedOrderByPatternAndList) {
  TempDir dir;
  // Written out of order: the set is read in name order, as llm.c's shard numbers sort.
  write_token_file(dir.file("train_000002.bin"), std::vector<int32_t>{5, 6});
  write_token_file(dir.file("train_000000.bin"), std::vector<int32_t>{1, 2});
  write_token_file(dir.file("train_000001.bin"), std::vector<int32_t>{3, 4});
  write_token_file(dir.file("val_000000.bin"), std::vector<int32_t>{9});
  const TokenDataset set = TokenDataset::load(dir.file("train_*.bin"), DataFormat::bin);
  EXPECT_EQ(ids_of(set), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_HAS(set.source(), "3 files");
  const std::string list = dir.file("train_000001.bin") + ", " + dir.file("val_*.bin");
  EXPECT_EQ(ids_of(TokenDataset::load(list, DataFormat::bin)), (std::vector<int32_t>{3, 4, 9}));

  std::string msg = message_of([&] { expand_data_paths(dir.file("test_*.bin"), "data.path"); });
  EXPECT_HAS(msg, "data.path: pattern '" + dir.file("test_*.bin") + "' matches no file");
  msg = message_of([&] { expand_data_paths(dir.path().string(), "data.val_path"); });
  EXPECT_HAS(msg, "is a directory");
  msg = message_of([&] { expand_data_paths(dir.file("nope.bin") + "," + list, "data.path"); });
  EXPECT_HAS(msg, "'" + dir.file("nope.bin") + "': file not found");

  // A file whose name holds a pattern's characters is that file, not what the pattern matches
  // ("train_00000[1].bin" as a pattern is train_000001.bin).
  write_token_file(dir.file("train_00000[1].bin"), std::vector<int32_t>{7, 8});
  EXPECT_EQ(expand_data_paths(dir.file("train_00000[1].bin"), "data.path"),
            (std::vector<std::string>{dir.file("train_00000[1].bin")}));
  EXPECT_EQ(expand_data_paths(dir.file("train_00000[2].bin"), "data.path"),
            (std::vector<std::string>{dir.file("train_000002.bin")}));
}

TEST(Dataset, ReadsLlamaThreeTokenFilesAndNanoGptFiles) {
  TempDir dir;
  const std::string llama3 =
      dir.write("llama3.bin", raw_tokens({128000, 7, 128255}, 4, 20240801, 7));
  EXPECT_EQ(ids_of(TokenDataset::load(llama3, DataFormat::bin)),
            (std::vector<int32_t>{128000, 7, 128255}));
  // nanoGPT's prepare.py: np.array(ids, dtype=np.uint16).tofile("train.bin"), no header.
  const std::string nanogpt = dir.write("train.bin", raw_tokens({50256, 0, 65535, 42}, 2));
  EXPECT_EQ(ids_of(TokenDataset::load(nanogpt, DataFormat::uint16)),
            (std::vector<int32_t>{50256, 0, 65535, 42}));
  std::string msg = message_of([&] { TokenDataset::load(nanogpt, DataFormat::bin); });
  EXPECT_HAS(msg, "data.format: uint16");
  const std::string odd = dir.write("odd.bin", std::string("\x01\x02\x03", 3));
  msg = message_of([&] { TokenDataset::load(odd, DataFormat::uint16); });
  EXPECT_HAS(msg, "3 bytes is not a whole number of uint16 tokens");
  // An llm.c file is not a headerless one: its header would become 512 tokens.
  write_token_file(dir.file("llmc.bin"), std::vector<int32_t>{1, 2});
  msg = message_of([&] { TokenDataset::load(dir.file("llmc.bin"), DataFormat::uint16); });
  EXPECT_HAS(msg, "set data.format: bin");
}

TEST(Dataset, TextRefusesTokenFiles) {
  TempDir dir;
  write_token_file(dir.file("shard.tok"), std::vector<int32_t>{1, 2, 3});
  std::string msg =
      message_of([&] { TokenDataset::load(dir.file("shard.tok"), DataFormat::text); });
  EXPECT_HAS(msg, "is an llm.c token file, which data.format text would read as bytes");
  const std::string headerless = dir.write("train.bin", raw_tokens({1, 2, 3}, 2));
  msg = message_of([&] { TokenDataset::load(headerless, DataFormat::text); });
  EXPECT_HAS(msg, "is named .bin but data.format is text");
  EXPECT_HAS(msg, "uint16 for nanoGPT");
}

TEST(Dataset, SplitWithASeparateValidationSet) {
  const TokenDataset train = iota_dataset(10), val = iota_dataset(4);
  const DataSplit split = train.split_with(val, 3);
  EXPECT_EQ(split.train.size(), 10u);
  EXPECT_EQ(split.val.size(), 4u);
  EXPECT_EQ(split.val.data(), val.tokens().data());
  const std::string msg = message_of([&] { train.split_with(val, 4); });
  EXPECT_HAS(msg, "4 tokens, fewer than one window of seq_len + 1 = 5 tokens");
}

TEST(Dataset, FormatNames) {
  EXPECT_EQ(parse_data_format("text"), DataFormat::text);
  EXPECT_EQ(parse_data_format("bin"), DataFormat::bin);
  EXPECT_EQ(data_format_name(DataFormat::bin), "bin");
  EXPECT_EQ(parse_data_format("uint16"), DataFormat::uint16);
  EXPECT_EQ(data_format_name(DataFormat::uint16), "uint16");
  std::string msg = message_of([] { parse_data_format("csv", "data.format in run.yaml:4"); });
  EXPECT_HAS(msg, "data.format in run.yaml:4");
  EXPECT_HAS(msg, "'csv'");
}

TEST(Dataset, VocabCheckNamesTheOffendingToken) {
  TokenDataset data({1, 2, 300, 5, 299}, "d.bin");
  EXPECT_EQ(data.max_token_id(), 300);
  EXPECT_NO_THROW(data.check_vocab(301));
  std::string msg = message_of([&] { data.check_vocab(256); });
  EXPECT_HAS(msg, "d.bin");
  EXPECT_HAS(msg, "token id 300 at position 2");
  EXPECT_HAS(msg, "[0, 256)");
  EXPECT_HAS(msg, "largest id in the data is 300");
  EXPECT_THROW(TokenDataset({1, -3}, "neg").check_vocab(256), ConfigError);
}

TEST(Dataset, SplitSizesAndOrder) {
  TokenDataset data = iota_dataset(1000);
  DataSplit s = data.split(0.1, 8);
  EXPECT_EQ(s.train.size(), 900u);
  EXPECT_EQ(s.val.size(), 100u);
  EXPECT_EQ(s.train.front(), 0);
  EXPECT_EQ(s.train.back(), 899);
  EXPECT_EQ(s.val.front(), 900);  // the validation split is the tail of the stream
  EXPECT_EQ(s.val.back(), 999);

  DataSplit none = data.split(0.0, 8);
  EXPECT_EQ(none.train.size(), 1000u);
  EXPECT_TRUE(none.val.empty());

  DataSplit floored = iota_dataset(1001).split(0.25, 8);  // floor(250.25) = 250
  EXPECT_EQ(floored.val.size(), 250u);
  EXPECT_EQ(floored.train.size(), 751u);

  // Exactly one window in each split is enough.
  DataSplit tight = iota_dataset(18).split(0.5, 8);
  EXPECT_EQ(tight.train.size(), 9u);
  EXPECT_EQ(tight.val.size(), 9u);
}

TEST(Dataset, SplitRejectsBadFractions) {
  TokenDataset data = iota_dataset(1000);
  for (double f : {-0.1, 1.0, 1.5, std::nan("")}) {
    std::string msg = message_of([&] { data.split(f, 8); });
    EXPECT_HAS(msg, "iota");
    EXPECT_HAS(msg, "is outside [0, 1)");
  }
  EXPECT_HAS(message_of([&] { data.split(-0.1, 8); }), "val_fraction -0.1");
  EXPECT_HAS(message_of([&] { data.split(0.1, 0); }), "seq_len 0");
}

TEST(Dataset, SplitRejectsSplitsSmallerThanOneWindow) {
  std::string msg = message_of([] { iota_dataset(100).split(0.1, 128); });
  EXPECT_HAS(msg, "100 tokens with val_fraction 0.1 leave 90 training tokens");
  EXPECT_HAS(msg, "seq_len + 1 = 129");

  msg = message_of([] { iota_dataset(1000).split(0.01, 64); });
  EXPECT_HAS(msg, "leave 10 validation tokens");
  EXPECT_HAS(msg, "seq_len + 1 = 65");

  msg = message_of([] { iota_dataset(17).split(0.5, 8); });  // 9 train, 8 val
  EXPECT_HAS(msg, "leave 8 validation tokens");
  EXPECT_HAS(message_of([] { TokenDataset({}, "empty.txt").split(0.0, 4); }),
             "empty.txt: 0 tokens");
}

TEST(DefaultData, ExistsWithoutNetworkAndIsDeterministic) {
  TempDir dir;
  std::string path = default_text_path(dir.path());
  ASSERT_TRUE(std::filesystem::is_regular_file(path)) << path;
  TokenDataset data = TokenDataset::load(path, DataFormat::text);
  EXPECT_GT(data.size(), 16 * 1024);  // enough for a tiny model's windows and a validation split
  EXPECT_NO_THROW(data.split(0.1, 128));
  EXPECT_NO_THROW(data.check_vocab(256));

  std::string corpus = generate_default_corpus();
  EXPECT_GE(corpus.size(), size_t(64 * 1024));
  EXPECT_EQ(corpus, generate_default_corpus());
  for (char c : corpus) ASSERT_TRUE(c == '\n' || (c >= 32 && c < 127)) << int(c);
}

TEST(DefaultData, GeneratedCorpusFallbackIsWrittenAndReused) {
  // The fallback path, as on a system without base-files' GPL-3.
  TempDir dir;
  std::filesystem::path fallback = dir.path() / "sub";
  std::string path = default_text_path(fallback, dir.path() / "no-such-license");
  EXPECT_EQ(path, (fallback / kGeneratedCorpusName).string());
  std::string corpus = generate_default_corpus();
  TokenDataset data = TokenDataset::load(path, DataFormat::text);
  EXPECT_EQ(data.size(), int64_t(corpus.size()));
  auto written = std::filesystem::last_write_time(path);
  EXPECT_EQ(default_text_path(fallback, dir.path() / "no-such-license"), path);  // reused
  EXPECT_EQ(std::filesystem::last_write_time(path), written);
  // Fewer distinct bytes than a random text: a small grammar a tiny model can learn.
  std::vector<bool> seen(256);
  for (int32_t t : data.tokens()) seen[size_t(t)] = true;
  EXPECT_LT(std::count(seen.begin(), seen.end(), true), 50);
  // An existing preferred file wins.
  std::string mine = dir.write("mine.txt", "hello");
  EXPECT_EQ(default_text_path(fallback, mine), mine);
}

TEST(Dataset, TinyShakespeare) {
  std::string path = std::string(H2_SHARED_DATA_DIR) + "/tinyshakespeare.txt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing (fresh clone)";
  TokenDataset data = TokenDataset::load(path, DataFormat::text);
  EXPECT_GT(data.size(), 1000000);
  EXPECT_LT(data.max_token_id(), 128);  // plain ASCII
  DataSplit s = data.split(0.1, 128);
  EXPECT_EQ(int64_t(s.train.size() + s.val.size()), data.size());
  EXPECT_EQ(int64_t(s.val.size()), int64_t(std::floor(double(data.size()) * 0.1)));
}

}  // namespace
}  // namespace h2::data
