// Encoding and decoding of the store's frames (see store_protocol.h). Every length read from the
// wire is checked against what remains before anything is allocated.
#include "comm/bootstrap/store_protocol.h"

#include <fmt/format.h>

#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm::store_proto {
namespace {

// How many strings each op carries and whether it carries an i64; WAIT carries any count.
struct Shape {
  int strings;  // -1: any (prefixed by a u32 count)
  bool number;
};

std::optional<Shape> shape_of(Op op) {
  switch (op) {
    case Op::kHello:
      return Shape{1, false};
    case Op::kSet:
      return Shape{2, false};
    case Op::kGet:
      return Shape{1, false};
    case Op::kAdd:
      return Shape{1, true};
    case Op::kWait:
      return Shape{-1, false};
    case Op::kCas:
      return Shape{3, false};
    case Op::kOk:
      return Shape{0, false};
    case Op::kRefused:
      return Shape{1, false};
    case Op::kValue:
      return Shape{1, false};
    case Op::kInt:
      return Shape{0, true};
    case Op::kError:
      return Shape{1, false};
  }
  return std::nullopt;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_i64(std::string& out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Reads the payload front to back; every read checks what is left.
class Reader {
 public:
  Reader(std::string_view bytes, Op op) : bytes_(bytes), op_(op) {}

  uint32_t u32() { return static_cast<uint32_t>(get_le(take(4), 4)); }
  int64_t i64() { return static_cast<int64_t>(get_le(take(8), 8)); }
  std::string str() {
    uint32_t n = u32();
    const unsigned char* p = take(n);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  const unsigned char* take(size_t n) {
    if (n > left())
      H2_THROW(CommError, "store frame {} is cut short: needs {} more bytes at offset {}, has {}",
               op_name(op_), n, pos_, left());
    auto p = reinterpret_cast<const unsigned char*>(bytes_.data() + pos_);
    pos_ += n;
    return p;
  }

  std::string_view bytes_;
  Op op_;
  size_t pos_ = 0;
};

}  // namespace

std::string op_name(Op op) {
  switch (op) {
    case Op::kHello:
      return "HELLO";
    case Op::kSet:
      return "SET";
    case Op::kGet:
      return "GET";
    case Op::kAdd:
      return "ADD";
    case Op::kWait:
      return "WAIT";
    case Op::kCas:
      return "CAS";
    case Op::kOk:
      return "OK";
    case Op::kRefused:
      return "REFUSED";
    case Op::kValue:
      return "VALUE";
    case Op::kInt:
      return "INT";
    case Op::kError:
      return "ERROR";
  }
  return fmt::format("op{}", static_cast<int>(op));
}

Message hello(std::string token) {
  return {Op::kHello, {std::move(token)}, 0};
}
Message set(std::string key, std::string value) {
  return {Op::kSet, {std::move(key), std::move(value)}, 0};
}
Message get(std::string key) {
  return {Op::kGet, {std::move(key)}, 0};
}
Message add(std::string key, int64_t delta) {
  return {Op::kAdd, {std::move(key)}, delta};
}
Message wait(std::vector<std::string> keys) {
  if (keys.size() > kMaxWaitKeys)
    H2_THROW(CommError, "store WAIT of {} keys: at most {} keys a request", keys.size(),
             kMaxWaitKeys);
  return {Op::kWait, std::move(keys), 0};
}
Message cas(std::string key, std::string expected, std::string desired) {
  return {Op::kCas, {std::move(key), std::move(expected), std::move(desired)}, 0};
}
Message ok() {
  return {Op::kOk, {}, 0};
}
Message refused(std::string reason) {
  return {Op::kRefused, {std::move(reason)}, 0};
}
Message value(std::string value) {
  return {Op::kValue, {std::move(value)}, 0};
}
Message integer(int64_t number) {
  return {Op::kInt, {}, number};
}
Message error(std::string message) {
  return {Op::kError, {std::move(message)}, 0};
}

std::string encode(const Message& message) {
  std::optional<Shape> shape = shape_of(message.op);
  H2_CHECK(shape.has_value(), "unknown store opcode {}", static_cast<int>(message.op));
  H2_CHECK(shape->strings < 0 || message.strings.size() == static_cast<size_t>(shape->strings),
           "store message {} carries {} strings, expected {}", op_name(message.op),
           message.strings.size(), shape->strings);
  uint64_t body = 1 + (shape->strings < 0 ? 4 : 0) + (shape->number ? 8 : 0);
  for (const std::string& s : message.strings) body += 4 + s.size();
  if (body > kMaxFrameBytes)
    H2_THROW(CommError, "store {} frame of {} bytes exceeds the {} MiB frame limit",
             op_name(message.op), body, kMaxFrameBytes >> 20);
  std::string out;
  out.reserve(kHeaderBytes + body);
  put_u32(out, static_cast<uint32_t>(body));
  out.push_back(static_cast<char>(message.op));
  if (shape->strings < 0) put_u32(out, static_cast<uint32_t>(message.strings.size()));
  for (const std::string& s : message.strings) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out += s;
  }
  if (shape->number) put_i64(out, message.number);
  return out;
}

uint32_t decode_length(const unsigned char* header, uint32_t limit) {
  auto length = static_cast<uint32_t>(get_le(header, 4));
  if (length == 0) H2_THROW(CommError, "store frame announces 0 bytes (no opcode)");
  if (length > limit)
    H2_THROW(CommError, "store frame of {} bytes exceeds the limit of {} bytes", length, limit);
  return length;
}

Message decode_body(std::string_view body) {
  if (body.empty()) H2_THROW(CommError, "store frame has no opcode");
  auto op = static_cast<Op>(static_cast<unsigned char>(body[0]));
  std::optional<Shape> shape = shape_of(op);
  if (!shape)
    H2_THROW(CommError, "store frame has unknown opcode {}",
             static_cast<int>(static_cast<unsigned char>(body[0])));
  Reader reader(body.substr(1), op);
  Message message{op, {}, 0};
  size_t count = static_cast<size_t>(shape->strings);
  if (shape->strings < 0) {
    count = reader.u32();
    // Each string needs at least its 4-byte length: refuse counts the payload cannot hold
    // before reserving anything.
    if (count > reader.left() / 4)
      H2_THROW(CommError, "store frame {} announces {} keys in {} bytes", op_name(op), count,
               reader.left());
    if (op == Op::kWait && count > kMaxWaitKeys)
      H2_THROW(CommError, "store frame {} announces {} keys, more than {}", op_name(op), count,
               kMaxWaitKeys);
  }
  message.strings.reserve(count);
  for (size_t i = 0; i < count; ++i) message.strings.push_back(reader.str());
  if (shape->number) message.number = reader.i64();
  if (reader.left() != 0)
    H2_THROW(CommError, "store frame {} has {} bytes left over", op_name(op), reader.left());
  return message;
}

std::optional<Message> decode_frame(std::string_view bytes, size_t* consumed, uint32_t limit) {
  if (bytes.size() < kHeaderBytes) return std::nullopt;
  uint32_t length = decode_length(reinterpret_cast<const unsigned char*>(bytes.data()), limit);
  if (bytes.size() - kHeaderBytes < length) return std::nullopt;
  Message message = decode_body(bytes.substr(kHeaderBytes, length));
  if (consumed != nullptr) *consumed = kHeaderBytes + length;
  return message;
}

bool tokens_equal(std::string_view a, std::string_view b) {
  // Walk the longer string once whatever the contents; a length difference also makes it unequal.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace h2::comm::store_proto
