// The store server: an io_context on one thread, an acceptor, and a Session per connection kept
// alive by its pending handlers (shared_ptr). The map and the parked waiters are touched only on
// that thread, so they need no lock. Shutdown: stop the io_context, join, then destroying it
// destroys the sessions, which closes their sockets.
#include "comm/bootstrap/store_server.h"

// Boost.Asio 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <deque>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/bootstrap/store_protocol.h"
#include "comm/comm_error.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::comm {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
namespace proto = store_proto;

class Session;

// A GET or WAIT parked until `remaining` of its keys exist.
struct Waiter {
  std::weak_ptr<Session> session;
  proto::Op op = proto::Op::kGet;
  std::vector<std::string> keys;  // the keys it is registered under (distinct, absent when parked)
  size_t remaining = 0;
  bool cancelled = false;
};

// Everything the io thread owns.
struct State {
  std::string label;  // host:port, for logs
  std::string token;
  // How long a connection may stay unauthenticated: thousands that never sent HELLO took the
  // server to 1.3 GB and out of descriptors, locking real ranks out (StoreServer::kHelloTimeout).
  std::chrono::milliseconds hello_timeout{StoreServer::kHelloTimeout};
  std::atomic<int64_t> refused{0};
  std::unordered_map<std::string, std::string> data;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters;

  // Stores a value and wakes the waiters of a key that did not exist.
  void put(const std::string& key, std::string value);
  void unregister(const std::shared_ptr<Waiter>& waiter);
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, State& state)
      : socket_(std::move(socket)), state_(state), hello_timer_(socket_.get_executor()) {
    error_code ec;
    tcp::endpoint peer = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer")
               : fmt::format("{}:{}", peer.address().to_string(), peer.port());
  }

  void start() {
    hello_timer_.expires_after(state_.hello_timeout);
    hello_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec || self->authenticated_ || self->closed_) return;
      self->state_.refused.fetch_add(1);
      H2_LOG_WARN("store {} closes the connection from {}: no HELLO within {} ms",
                  self->state_.label, self->peer_, self->state_.hello_timeout.count());
      self->close();
    });
    read_header();
  }

  // A parked request's keys all exist now.
  void wake() {
    std::shared_ptr<Waiter> waiter = std::move(parked_);
    if (closed_ || !waiter) return;
    if (waiter->op == proto::Op::kGet)
      reply(proto::value(state_.data.at(waiter->keys.front())));
    else
      reply(proto::ok());
  }

 private:
  void read_header() {
    asio::async_read(
        socket_, asio::buffer(header_),
        [self = shared_from_this()](const error_code& ec, size_t) { self->on_header(ec); });
  }

  void on_header(const error_code& ec) {
    if (ec || closed_) return close();
    uint32_t length = 0;
    try {
      length = proto::decode_length(header_,
                                    authenticated_ ? proto::kMaxFrameBytes : proto::kMaxHelloBytes);
    } catch (const CommError& e) {
      return reject(e.what());
    }
    body_.resize(length);
    asio::async_read(
        socket_, asio::buffer(body_),
        [self = shared_from_this()](const error_code& ec, size_t) { self->on_body(ec); });
  }

  void on_body(const error_code& ec) {
    if (ec || closed_) return close();
    proto::Message request;
    try {
      request = proto::decode_body(body_);
    } catch (const CommError& e) {
      return reject(e.what());
    }
    body_.clear();
    body_.shrink_to_fit();  // do not keep a large SET's buffer per idle connection
    if (!authenticated_) return hello(request);
    if (parked_) return reject("sent a request while its previous GET/WAIT is still waiting");
    if (!handle(request)) return;
    // The next request once this reply is written: a client that sends without reading would
    // otherwise pile replies up in the server (40 GETs of 32 MiB took 1.3 GB). While parked,
    // with no reply due, read on: that is how a closed connection is noticed.
    if (!writes_.empty()) {
      read_after_write_ = true;
      return;
    }
    read_header();
  }

  void hello(const proto::Message& request) {
    if (request.op != proto::Op::kHello)
      return refuse(fmt::format("first frame was {}, not HELLO", proto::op_name(request.op)));
    if (!proto::tokens_equal(request.strings.front(), state_.token))
      return refuse("wrong job token");
    authenticated_ = true;
    hello_timer_.cancel();
    reply(proto::ok());
    read_header();
  }

  // Serves one request; false when the connection is being closed.
  bool handle(const proto::Message& request) {
    const std::vector<std::string>& s = request.strings;
    switch (request.op) {
      case proto::Op::kSet:
        state_.put(s[0], s[1]);
        reply(proto::ok());
        return true;
      case proto::Op::kGet: {
        auto it = state_.data.find(s[0]);
        if (it != state_.data.end())
          reply(proto::value(it->second));
        else
          park(proto::Op::kGet, {s[0]});
        return true;
      }
      case proto::Op::kAdd:
        add(s[0], request.number);
        return true;
      case proto::Op::kWait: {
        std::vector<std::string> missing;
        for (const std::string& key : s)
          if (!state_.data.contains(key)) missing.push_back(key);
        std::sort(missing.begin(), missing.end());
        missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
        if (missing.empty())
          reply(proto::ok());
        else
          park(proto::Op::kWait, std::move(missing));
        return true;
      }
      case proto::Op::kCas: {
        auto it = state_.data.find(s[0]);
        std::string current = it == state_.data.end() ? std::string() : it->second;
        if (current == s[1]) {
          state_.put(s[0], s[2]);
          current = s[2];
        }
        reply(proto::value(std::move(current)));
        return true;
      }
      default:
        reject(fmt::format("sent {}, which is not a request", proto::op_name(request.op)));
        return false;
    }
  }

  void add(const std::string& key, int64_t delta) {
    int64_t current = 0;
    auto it = state_.data.find(key);
    if (it != state_.data.end()) {
      const std::string& text = it->second;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || ptr != text.data() + text.size())
        return reply(proto::error(fmt::format("add('{}'): the value is not an integer", key)));
    }
    int64_t sum = 0;
    if (__builtin_add_overflow(current, delta, &sum))
      return reply(proto::error(fmt::format("add('{}'): {} + {} overflows", key, current, delta)));
    state_.put(key, std::to_string(sum));
    reply(proto::integer(sum));
  }

  void park(proto::Op op, std::vector<std::string> keys) {
    auto waiter = std::make_shared<Waiter>();
    waiter->session = weak_from_this();
    waiter->op = op;
    waiter->remaining = keys.size();
    waiter->keys = std::move(keys);
    for (const std::string& key : waiter->keys) state_.waiters[key].push_back(waiter);
    parked_ = std::move(waiter);
  }

  void reply(const proto::Message& message) {
    writes_.push_back(proto::encode(message));
    if (writes_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (ec) return self->close();
                        self->writes_.pop_front();
                        if (!self->writes_.empty()) {
                          self->write_next();
                        } else if (self->closing_) {
                          self->close();
                        } else if (self->read_after_write_) {
                          self->read_after_write_ = false;
                          self->read_header();
                        }
                      });
  }

  // A failed handshake: counted, logged, answered REFUSED, closed.
  void refuse(const std::string& reason) {
    state_.refused.fetch_add(1);
    H2_LOG_WARN("store {} refused a client from {}: {}", state_.label, peer_, reason);
    finish(proto::refused(reason));
  }

  // A bad frame from a client: before the handshake it is refused, after it gets ERROR; closed
  // either way, since the stream can no longer be trusted to be in step.
  void reject(const std::string& reason) {
    if (!authenticated_) return refuse(reason);
    H2_LOG_WARN("store {} closes the connection from {}: {}", state_.label, peer_, reason);
    finish(proto::error(reason));
  }

  void finish(const proto::Message& last) {
    closing_ = true;
    if (parked_) {
      state_.unregister(parked_);
      parked_.reset();
    }
    reply(last);
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (parked_) {
      state_.unregister(parked_);
      parked_.reset();
    }
    hello_timer_.cancel();
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  State& state_;
  std::string peer_;
  unsigned char header_[proto::kHeaderBytes] = {};
  std::string body_;
  std::deque<std::string> writes_;
  std::shared_ptr<Waiter> parked_;
  asio::steady_timer hello_timer_;  // closes a connection still unauthenticated at its expiry
  bool authenticated_ = false;
  bool closing_ = false;           // close once the queued replies are written
  bool read_after_write_ = false;  // the next request is read once the replies are written
  bool closed_ = false;
};

void State::put(const std::string& key, std::string value) {
  auto [it, inserted] = data.insert_or_assign(key, std::move(value));
  if (!inserted) return;  // waiters only wait for absent keys
  auto found = waiters.find(key);
  if (found == waiters.end()) return;
  std::vector<std::shared_ptr<Waiter>> woken = std::move(found->second);
  waiters.erase(found);
  for (const std::shared_ptr<Waiter>& waiter : woken) {
    if (waiter->cancelled || --waiter->remaining > 0) continue;
    if (std::shared_ptr<Session> session = waiter->session.lock()) session->wake();
  }
}

void State::unregister(const std::shared_ptr<Waiter>& waiter) {
  waiter->cancelled = true;
  for (const std::string& key : waiter->keys) {
    auto found = waiters.find(key);
    if (found == waiters.end()) continue;
    std::erase(found->second, waiter);
    if (found->second.empty()) waiters.erase(found);
  }
}

}  // namespace

// Member order matters for destruction: the io_context goes before the state its sessions use,
// and the acceptor before the io_context.
struct StoreServer::Impl {
  std::string host;
  int port = 0;
  State state;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  std::thread thread;

  void bind(int requested_port) {
    std::string where = fmt::format("{}:{}", host, requested_port);
    if (requested_port < 0 || requested_port > 65535)
      H2_THROW(CommError, "store cannot listen on {}: the port is outside [0, 65535]", where);
    error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(host, std::to_string(requested_port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec) H2_THROW(CommError, "store cannot listen on {}: {}", where, ec.message());
    for (const auto& entry : endpoints) {
      error_code attempt;
      tcp::endpoint endpoint = entry.endpoint();
      acceptor.open(endpoint.protocol(), attempt);
      if (!attempt) acceptor.set_option(tcp::acceptor::reuse_address(true), attempt);
      if (!attempt) acceptor.bind(endpoint, attempt);
      if (!attempt) acceptor.listen(asio::socket_base::max_listen_connections, attempt);
      if (!attempt) {
        port = acceptor.local_endpoint().port();
        return;
      }
      ec = attempt;
      error_code ignored;
      acceptor.close(ignored);
    }
    H2_THROW(CommError, "store cannot listen on {}: {}", where,
             ec ? ec.message() : std::string("the name resolves to no address"));
  }

  void accept() {
    acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors and the like: log and try again shortly rather than spin.
        H2_LOG_WARN("store {}: accept failed: {}", state.label, ec.message());
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](const error_code& wait) {
          if (!wait) accept();
        });
        return;
      }
      accept();  // first: a session that fails to start must not stop the accepting
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      try {
        std::make_shared<Session>(std::move(socket), state)->start();
      } catch (const std::exception& e) {
        H2_LOG_ERROR("store {}: dropped a new connection: {}", state.label, e.what());
      }
    });
  }

  void run() {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        // A handler failed (out of memory, say): that session is gone, the server goes on.
        H2_LOG_ERROR("store {}: {}", state.label, e.what());
      }
    }
  }
};

StoreServer::StoreServer(std::string host, int port, std::string token,
                         std::chrono::milliseconds hello_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->state.token = std::move(token);
  impl_->state.hello_timeout = hello_timeout;
  impl_->bind(port);
  impl_->state.label = fmt::format("{}:{}", impl_->host, impl_->port);
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

StoreServer::~StoreServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

const std::string& StoreServer::host() const {
  return impl_->host;
}

int StoreServer::port() const {
  return impl_->port;
}

int64_t StoreServer::refused_clients() const {
  return impl_->state.refused.load();
}

}  // namespace h2::comm
