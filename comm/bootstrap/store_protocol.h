// The rendezvous store's wire format: frames of [u32 little-endian length][u8 opcode][payload],
// where length counts the opcode and payload and never exceeds kMaxFrameBytes. Strings are a u32
// little-endian length and the bytes (any bytes, NUL included); integers are i64 little-endian.
// A connection opens with HELLO(token), answered OK or REFUSED (then closed). Requests are answered
// in order, one at a time. Pure functions: no sockets here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h2::comm::store_proto {

inline constexpr size_t kHeaderBytes = 4;
// Largest opcode + payload of one frame (a value just under 64 MiB fits in a SET).
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
// Largest first frame of a connection: an unauthenticated peer cannot make the server allocate
// more.
inline constexpr uint32_t kMaxHelloBytes = 64u << 10;
// Most keys of one WAIT: each costs the server a string and a waiter entry, about 17x its bytes
// on the wire (one 64 MiB WAIT of 4-byte keys took 1.1 GB); a job's WAITs name a key per rank.
inline constexpr uint32_t kMaxWaitKeys = 1u << 20;

enum class Op : uint8_t {
  // requests            payload
  kHello = 1,  // token
  kSet = 2,    // key, value
  kGet = 3,    // key                      (answered when the key exists)
  kAdd = 4,    // key, i64 delta
  kWait = 5,   // u32 count, count keys    (answered when every key exists)
  kCas = 6,    // key, expected, desired
  // replies
  kOk = 64,       // (empty)                  HELLO accepted, SET done, WAIT satisfied
  kRefused = 65,  // reason                   HELLO refused; the server closes the connection
  kValue = 66,    // value                    GET, CAS
  kInt = 67,      // i64                      ADD
  kError = 68,    // message                  the request failed (the connection stays usable
                  //                          unless the frame itself was bad)
};

// "HELLO", "SET", ...; "op<N>" for an unknown code.
std::string op_name(Op op);

// One decoded frame. `strings` holds the op's strings in payload order (for WAIT, the keys);
// `number` the i64 of ADD and INT.
struct Message {
  Op op = Op::kOk;
  std::vector<std::string> strings;
  int64_t number = 0;

  bool operator==(const Message&) const = default;
};

// Builders for each message.
Message hello(std::string token);
Message set(std::string key, std::string value);
Message get(std::string key);
Message add(std::string key, int64_t delta);
Message wait(std::vector<std::string> keys);
Message cas(std::string key, std::string expected, std::string desired);
Message ok();
Message refused(std::string reason);
Message value(std::string value);
Message integer(int64_t number);
Message error(std::string message);

// The whole frame, header included. CommError when it would exceed kMaxFrameBytes; h2::Error when
// the message's shape does not fit its op (a programming error).
std::string encode(const Message& message);

// The body length a header announces; CommError when it is 0 or above `limit`.
uint32_t decode_length(const unsigned char* header, uint32_t limit = kMaxFrameBytes);

// Decodes a body (opcode + payload). CommError on an unknown opcode, a payload cut short, a string
// running past the end, or bytes left over.
Message decode_body(std::string_view body);

// Decodes the first frame of `bytes`: nullopt while the frame is incomplete (more bytes needed),
// else the message, with *consumed set to the frame's size. CommError as decode_length/decode_body.
std::optional<Message> decode_frame(std::string_view bytes, size_t* consumed,
                                    uint32_t limit = kMaxFrameBytes);

// Compares two tokens in time that depends only on their lengths, not on where they differ.
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace h2::comm::store_proto
