// The store client: asynchronous socket operations driven on the caller's thread by a private
// io_context, each run only until its deadline, so no call can outlive its timeout. On failure the
// socket is closed and the aborted handlers are drained before returning, so no handler outlives
// the stack frame it refers to.
#include "comm/bootstrap/store_client.h"

// Boost.Asio 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/bootstrap/store_protocol.h"
#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
namespace proto = store_proto;

Clock::time_point deadline_after(Millis timeout) {
  // Clamp so that "forever" (Millis::max()) does not overflow the clock.
  constexpr Millis kLongest = std::chrono::hours(24 * 365 * 100);
  return Clock::now() + std::clamp(timeout, Millis(0), kLongest);
}

std::string seconds(Millis timeout) {
  return fmt::format("{:g}", timeout.count() / 1000.0);
}

// A key as it appears in messages: printable, escaped, not too long.
std::string quoted(const std::string& key) {
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < 64; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (key.size() > 64) out += "...";
  return out + "'";
}

std::string keys_text(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) out += (i ? ", " : "") + quoted(keys[i]);
  if (keys.size() > 4) out += fmt::format(", ... ({} keys)", keys.size());
  return out;
}

bool is_disconnect(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted ||
         ec == asio::error::not_connected;
}

}  // namespace

struct StoreClient::Impl {
  std::string host;
  int port = 0;
  std::string token;
  Millis timeout{0};
  std::string address;  // host:port
  asio::io_context io;
  tcp::socket socket{io};
  bool connected = false;

  // Runs handlers until `done` or the deadline; false on timeout.
  bool run_until(const bool& done, Clock::time_point deadline) {
    io.restart();
    while (!done) {
      if (io.run_one_until(deadline) == 0 && !done) {
        if (Clock::now() >= deadline) return false;
        H2_CHECK(!io.stopped(), "store client waits with no operation pending");
      }
    }
    return true;
  }

  // Closes the connection and drains the handlers its close aborted.
  void drop() {
    error_code ignored;
    socket.close(ignored);
    io.restart();
    io.run();
    connected = false;
  }

  [[noreturn]] void fail(const std::string& message) {
    drop();
    throw CommError(message);
  }

  // One socket operation started by `start(handler)`, awaited until the deadline.
  template <typename Start>
  void await(Start start, Clock::time_point deadline, const std::string& what, Millis limit) {
    bool done = false;
    error_code result;
    start([&](const error_code& ec, auto&&...) {
      result = ec;
      done = true;
    });
    if (!run_until(done, deadline))
      fail(fmt::format("store at {}: {} timed out after {} s", address, what, seconds(limit)));
    if (is_disconnect(result))
      fail(fmt::format("store at {} closed the connection during {}", address, what));
    if (result) fail(fmt::format("store at {}: {} failed: {}", address, what, result.message()));
  }

  // Sends one request and reads its reply.
  proto::Message exchange(const proto::Message& request, Clock::time_point deadline,
                          const std::string& what, Millis limit) {
    std::string frame = proto::encode(request);  // CommError when over the frame limit
    await([&](auto handler) { asio::async_write(socket, asio::buffer(frame), handler); }, deadline,
          what, limit);
    unsigned char header[proto::kHeaderBytes];
    await([&](auto handler) { asio::async_read(socket, asio::buffer(header), handler); }, deadline,
          what, limit);
    std::string body;
    try {
      body.resize(proto::decode_length(header));
    } catch (const CommError& e) {
      fail(fmt::format("store at {}: {}: bad reply: {}", address, what, e.what()));
    }
    await([&](auto handler) { asio::async_read(socket, asio::buffer(body), handler); }, deadline,
          what, limit);
    try {
      return proto::decode_body(body);
    } catch (const CommError& e) {
      fail(fmt::format("store at {}: {}: bad reply: {}", address, what, e.what()));
    }
  }

  // One round of connection attempts to every address the host resolves to; true once one
  // connected. The resolver blocks (a numeric address resolves at once).
  bool try_endpoints(Clock::time_point deadline, std::string& last_error) {
    error_code ec;
    tcp::resolver resolver(io);
    auto endpoints =
        resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
    if (ec) last_error = ec.message();
    for (const auto& entry : endpoints) {
      bool done = false;
      error_code result;
      socket.async_connect(entry.endpoint(), [&](const error_code& r) {
        result = r;
        done = true;
      });
      if (!run_until(done, deadline)) {
        drop();
        last_error = "timed out";
        return false;
      }
      if (!result) return true;
      last_error = result.message();
      drop();
    }
    return false;
  }

  // Connects (retrying while nobody listens yet) and presents the token.
  void connect(Clock::time_point deadline, Millis limit) {
    std::string last_error = "no attempt finished";
    Millis backoff(10);
    for (;;) {
      if (try_endpoints(deadline, last_error)) break;
      if (Clock::now() + backoff >= deadline)
        fail(fmt::format("store at {}:{} did not answer within {} s ({})", host, port,
                         seconds(limit), last_error));
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, Millis(200));
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    proto::Message reply = exchange(proto::hello(token), deadline, "the handshake", limit);
    if (reply.op == proto::Op::kRefused) {
      drop();
      H2_THROW(AuthError, "store at {}:{} refused this client's token ({})", host, port,
               reply.strings.front());
    }
    if (reply.op != proto::Op::kOk)
      fail(fmt::format("store at {}: the handshake got {}, not OK (is this an H2 store?)", address,
                       proto::op_name(reply.op)));
    connected = true;
  }

  // A request and its reply, connecting first if need be; a server ERROR becomes a CommError.
  proto::Message call(const proto::Message& request, proto::Op expected, const std::string& what,
                      Millis limit) {
    Clock::time_point deadline = deadline_after(limit);
    if (!connected) connect(deadline, limit);
    proto::Message reply = exchange(request, deadline, what, limit);
    if (reply.op == proto::Op::kError)
      fail(fmt::format("store at {}: {} failed: {}", address, what, reply.strings.front()));
    if (reply.op != expected)
      fail(fmt::format("store at {}: {} got reply {}, expected {}", address, what,
                       proto::op_name(reply.op), proto::op_name(expected)));
    return reply;
  }
};

StoreClient::StoreClient(std::string host, int port, std::string token, Millis timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  impl_->token = std::move(token);
  impl_->timeout = timeout;
  impl_->address = fmt::format("{}:{}", impl_->host, port);
  impl_->connect(deadline_after(timeout), timeout);
}

StoreClient::~StoreClient() = default;

const std::string& StoreClient::address() const {
  return impl_->address;
}

void StoreClient::set(const std::string& key, const std::string& value) {
  impl_->call(proto::set(key, value), proto::Op::kOk, fmt::format("set({})", quoted(key)),
              impl_->timeout);
}

std::string StoreClient::get(const std::string& key, Millis timeout) {
  proto::Message reply =
      impl_->call(proto::get(key), proto::Op::kValue, fmt::format("get({})", quoted(key)), timeout);
  return std::move(reply.strings.front());
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  return impl_
      ->call(proto::add(key, delta), proto::Op::kInt, fmt::format("add({})", quoted(key)),
             impl_->timeout)
      .number;
}

void StoreClient::wait(const std::vector<std::string>& keys, Millis timeout) {
  if (keys.empty()) return;
  impl_->call(proto::wait(keys), proto::Op::kOk, fmt::format("wait({})", keys_text(keys)), timeout);
}

std::string StoreClient::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  proto::Message reply = impl_->call(proto::cas(key, expected, desired), proto::Op::kValue,
                                     fmt::format("compare_set({})", quoted(key)), impl_->timeout);
  return std::move(reply.strings.front());
}

}  // namespace h2::comm
