// The store's wire format: round trips of every message, the byte layout, truncated, oversize and
// malformed frames, and token comparison.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include <string>

#include "comm/bootstrap/store_protocol.h"
#include "comm/comm_error.h"

namespace h2::comm::store_proto {
namespace {

using ::testing::HasSubstr;

std::string thrown(auto&& fn) {
  try {
    fn();
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

std::string binary() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s + std::string("\0\0mid\0", 6);
}

TEST(StoreProtocolTest, EveryMessageRoundTrips) {
  std::vector<Message> messages = {
      hello("token"),
      set("key", binary()),
      set("", ""),
      get("k"),
      add("counter", -7),
      add("c", INT64_MIN),
      wait({}),
      wait({"a", "", "c"}),
      cas("k", "", binary()),
      ok(),
      refused("wrong token"),
      value(binary()),
      integer(INT64_MAX),
      error("boom"),
  };
  for (const Message& m : messages) {
    std::string frame = encode(m);
    size_t consumed = 0;
    std::optional<Message> back = decode_frame(frame, &consumed);
    ASSERT_TRUE(back.has_value()) << op_name(m.op);
    EXPECT_EQ(*back, m) << op_name(m.op);
    EXPECT_EQ(consumed, frame.size());
  }
}

TEST(StoreProtocolTest, ByteLayoutIsLittleEndian) {
  EXPECT_EQ(encode(get("k")), std::string("\x06\0\0\0\x03\x01\0\0\0k", 10));
  EXPECT_EQ(encode(integer(0x0102)), std::string("\x09\0\0\0\x43\x02\x01\0\0\0\0\0\0", 13));
  EXPECT_EQ(encode(wait({"a"})), std::string("\x0a\0\0\0\x05\x01\0\0\0\x01\0\0\0a", 14));
}

TEST(StoreProtocolTest, FramesDecodeOneAfterAnother) {
  std::string stream = encode(set("a", "1")) + encode(get("a"));
  size_t consumed = 0;
  std::optional<Message> first = decode_frame(stream, &consumed);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, set("a", "1"));
  std::optional<Message> second =
      decode_frame(std::string_view(stream).substr(consumed), &consumed);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, get("a"));
}

TEST(StoreProtocolTest, TruncatedFrameWaitsForMoreBytes) {
  std::string frame = encode(cas("key", "old", "new"));
  for (size_t n = 0; n < frame.size(); ++n) {
    size_t consumed = 99;
    EXPECT_FALSE(decode_frame(std::string_view(frame).substr(0, n), &consumed).has_value()) << n;
    EXPECT_EQ(consumed, 99u);
  }
}

TEST(StoreProtocolTest, StringRunningPastItsFrameIsRejected) {
  // GET whose key claims 5 bytes while the frame holds 1.
  std::string body("\x03\x05\0\0\0k", 6);
  EXPECT_THAT(thrown([&] { decode_body(body); }), HasSubstr("cut short"));
  // ADD without its i64.
  std::string add_body = encode(add("k", 1)).substr(kHeaderBytes);
  add_body.resize(add_body.size() - 1);
  EXPECT_THAT(thrown([&] { decode_body(add_body); }), HasSubstr("cut short"));
}

TEST(StoreProtocolTest, OversizeFrameIsRejected) {
  unsigned char header[4] = {0x01, 0x00, 0x00, 0x04};  // 64 MiB + 1
  EXPECT_THAT(thrown([&] { decode_length(header); }), HasSubstr("exceeds the limit"));
  unsigned char exact[4] = {0x00, 0x00, 0x00, 0x04};  // exactly 64 MiB
  EXPECT_EQ(decode_length(exact), kMaxFrameBytes);
  EXPECT_THAT(thrown([&] { decode_length(exact, kMaxHelloBytes); }), HasSubstr("exceeds"));
  std::string frame(reinterpret_cast<char*>(header), 4);
  EXPECT_THAT(thrown([&] { decode_frame(frame, nullptr); }), HasSubstr("exceeds"));
  std::string big(kMaxFrameBytes, 'x');
  EXPECT_THAT(thrown([&] { encode(value(big)); }), HasSubstr("frame limit"));
  EXPECT_EQ(encode(value(big.substr(0, kMaxFrameBytes - 5))).size(), kHeaderBytes + kMaxFrameBytes);
}

// A WAIT's keys cost the server far more than their bytes: at most kMaxWaitKeys a request, both
// when a client makes one and when the server reads one.
TEST(StoreProtocolTest, AWaitOfTooManyKeysIsRejected) {
  std::vector<std::string> keys(kMaxWaitKeys + 1, "k");
  EXPECT_THROW(wait(keys), CommError);
  keys.pop_back();
  const std::string frame = encode(wait(keys));
  EXPECT_EQ(decode_body(std::string_view(frame).substr(kHeaderBytes)).strings.size(), kMaxWaitKeys);
  // The same frame announcing one key more (its count field follows the opcode).
  std::string body(frame.substr(kHeaderBytes));
  const uint32_t count = kMaxWaitKeys + 1;
  std::memcpy(body.data() + 1, &count, 4);
  body += std::string("\x01\x00\x00\x00k", 5);
  try {
    decode_body(body);
    FAIL() << "decoded a WAIT of " << count << " keys";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1048576"), std::string::npos) << e.what();
  }
}

TEST(StoreProtocolTest, MalformedFramesAreRejected) {
  unsigned char zero[4] = {0, 0, 0, 0};
  EXPECT_THAT(thrown([&] { decode_length(zero); }), HasSubstr("0 bytes"));
  EXPECT_THAT(thrown([&] { decode_body(std::string("\x99", 1)); }),
              HasSubstr("unknown opcode 153"));
  EXPECT_THAT(thrown([&] { decode_body(encode(ok()).substr(kHeaderBytes) + "x"); }),
              HasSubstr("left over"));
  // WAIT announcing 2^32-1 keys in 0 bytes must fail before reserving anything.
  EXPECT_THAT(thrown([&] { decode_body(std::string("\x05\xff\xff\xff\xff", 5)); }),
              HasSubstr("announces"));
}

TEST(StoreProtocolTest, TokensCompareByContentAndLength) {
  EXPECT_TRUE(tokens_equal("abc", "abc"));
  EXPECT_TRUE(tokens_equal("", ""));
  EXPECT_FALSE(tokens_equal("abc", "abd"));
  EXPECT_FALSE(tokens_equal("abc", "ab"));
  EXPECT_FALSE(tokens_equal("", "a"));
  EXPECT_FALSE(tokens_equal(std::string("a\0", 2), "a"));
}

}  // namespace
}  // namespace h2::comm::store_proto
