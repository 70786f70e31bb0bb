// The rendezvous store end to end on loopback: a server and clients on threads (set/get, waiting
// gets, atomic adds, wait, compare-set, timeouts, tokens, binary and large values, oversize
// frames, a server that goes away). Raw sockets play misbehaving clients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

// Boost.Asio 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "comm/bootstrap/store_client.h"
#include "comm/bootstrap/store_protocol.h"
#include "comm/bootstrap/store_server.h"
#include "comm/comm_error.h"

namespace h2::comm {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace proto = store_proto;

constexpr char kToken[] = "job-token";

class StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<StoreClient> client(Millis timeout = 2s) {
    return std::make_unique<StoreClient>("127.0.0.1", server_->port(), kToken, timeout);
  }

  std::unique_ptr<StoreServer> server_ = std::make_unique<StoreServer>("127.0.0.1", 0, kToken);
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A hand-driven connection: sends raw bytes, reads everything until the server closes.
class RawConnection {
 public:
  explicit RawConnection(int port) : socket_(io_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
    timeval tv{2, 0};  // a server that never closes fails the test instead of hanging it
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes), ec);
  }
  // Every frame received until the server closed; `closed` says whether it did.
  std::vector<proto::Message> read_until_closed(bool* closed) {
    std::string bytes;
    char buf[4096];
    *closed = false;
    for (;;) {
      ssize_t n = ::recv(socket_.native_handle(), buf, sizeof buf, 0);
      if (n > 0) {
        bytes.append(buf, static_cast<size_t>(n));
        continue;
      }
      *closed = n == 0 || errno == ECONNRESET;
      break;
    }
    std::vector<proto::Message> messages;
    size_t consumed = 0;
    std::string_view rest(bytes);
    while (std::optional<proto::Message> m = proto::decode_frame(rest, &consumed)) {
      messages.push_back(*m);
      rest.remove_prefix(consumed);
    }
    return messages;
  }
  // One reply frame (the connection stays open).
  proto::Message read_one() {
    std::string bytes;
    char c;
    size_t consumed = 0;
    for (;;) {
      if (std::optional<proto::Message> m = proto::decode_frame(bytes, &consumed)) return *m;
      ssize_t n = ::recv(socket_.native_handle(), &c, 1, 0);
      if (n <= 0) throw std::runtime_error("connection closed");
      bytes.push_back(c);
    }
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

TEST_F(StoreTest, SetThenGet) {
  auto c = client();
  c->set("a", "1");
  EXPECT_EQ(c->get("a", 1s), "1");
  c->set("a", "two");
  EXPECT_EQ(client()->get("a", 1s), "two");
  c->set("empty", "");
  EXPECT_EQ(c->get("empty", 1s), "");
}

TEST_F(StoreTest, GetWaitsForALaterSetFromAnotherClient) {
  auto setter = client();
  std::string got;
  Clock::time_point start = Clock::now();
  std::thread getter([&] { got = client()->get("late", 3s); });
  std::this_thread::sleep_for(100ms);
  setter->set("late", "here");
  getter.join();
  EXPECT_EQ(got, "here");
  EXPECT_GE(ms_since(start), 90.0);
}

TEST_F(StoreTest, AddIsAtomicAcrossClients) {
  constexpr int kThreads = 4, kAdds = 1000;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto c = client();
      for (int i = 0; i < kAdds; ++i) seen[t].push_back(c->add("counter", 1));
    });
  for (std::thread& t : threads) t.join();
  std::set<int64_t> all;
  for (const auto& values : seen) all.insert(values.begin(), values.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kAdds));  // every result distinct
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
  auto c = client();
  EXPECT_EQ(c->get("counter", 1s), std::to_string(kThreads * kAdds));
  EXPECT_EQ(c->add("counter", -4000), 0);
  EXPECT_EQ(c->add("fresh", -3), -3);
}

TEST_F(StoreTest, AddOnATextValueFailsAndTheClientGoesOn) {
  auto c = client();
  c->set("text", "abc");
  try {
    c->add("text", 1);
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("add('text')"));
    EXPECT_THAT(e.what(), HasSubstr("not an integer"));
  }
  EXPECT_EQ(c->get("text", 1s), "abc");
}

TEST_F(StoreTest, WaitReturnsOnceEveryKeyExists) {
  auto setter = client();
  setter->set("k1", "x");
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    client()->wait({"k1", "k2", "k3", "k2"}, 3s);
    done = true;
  });
  setter->set("k2", "x");
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(done.load());
  setter->set("k3", "x");
  waiter.join();
  EXPECT_TRUE(done.load());
  setter->wait({"k1", "k2", "k3"}, 100ms);  // all present: immediate
  setter->wait({}, 100ms);
}

TEST_F(StoreTest, CompareSetSemantics) {
  auto c = client();
  // Absent key with a non-empty expectation: nothing changes, the answer is "" (absent).
  EXPECT_EQ(c->compare_set("cas", "x", "y"), "");
  EXPECT_THROW(c->get("cas", 50ms), CommError);
  // Absent key equals "": created.
  EXPECT_EQ(c->compare_set("cas", "", "first"), "first");
  EXPECT_EQ(c->get("cas", 1s), "first");
  // Mismatch: unchanged, the current value returned.
  EXPECT_EQ(c->compare_set("cas", "other", "second"), "first");
  EXPECT_EQ(c->get("cas", 1s), "first");
  // Match: swapped.
  EXPECT_EQ(c->compare_set("cas", "first", "second"), "second");
  EXPECT_EQ(c->get("cas", 1s), "second");
}

TEST_F(StoreTest, CompareSetCreatingAKeyWakesItsGetter) {
  std::string got;
  std::thread getter([&] { got = client()->get("leader", 3s); });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(client()->compare_set("leader", "", "rank3"), "rank3");
  getter.join();
  EXPECT_EQ(got, "rank3");
}

TEST_F(StoreTest, GetTimeoutIsACommErrorNamingTheKey) {
  auto c = client();
  Clock::time_point start = Clock::now();
  try {
    c->get("never", 200ms);
    FAIL() << "no timeout";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("get('never') timed out after 0.2 s"));
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("127.0.0.1:{}", server_->port())));
  }
  double elapsed = ms_since(start);
  EXPECT_GE(elapsed, 190.0);
  EXPECT_LT(elapsed, 1500.0);
  // The client reconnects for its next call, and the server forgot the abandoned waiter.
  c->set("never", "now");
  EXPECT_EQ(c->get("never", 1s), "now");
}

TEST_F(StoreTest, WrongTokenIsRefusedAndReadsNothing) {
  client()->set("secret", "value");
  try {
    StoreClient intruder("127.0.0.1", server_->port(), "not-the-token", 1s);
    FAIL() << "accepted a wrong token";
  } catch (const AuthError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("store at 127.0.0.1:{} refused this client's token",
                                                server_->port())));
  }
  EXPECT_EQ(server_->refused_clients(), 1);

  // Wrong token, then a GET anyway: REFUSED and a closed connection, never the value.
  RawConnection wrong(server_->port());
  wrong.send(proto::encode(proto::hello("guess")));
  EXPECT_EQ(wrong.read_one().op, proto::Op::kRefused);
  wrong.send(proto::encode(proto::get("secret")));
  bool closed = false;
  EXPECT_THAT(wrong.read_until_closed(&closed), ::testing::IsEmpty());
  EXPECT_TRUE(closed);

  // No HELLO at all.
  RawConnection rude(server_->port());
  rude.send(proto::encode(proto::get("secret")));
  std::vector<proto::Message> replies = rude.read_until_closed(&closed);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].op, proto::Op::kRefused);
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->refused_clients(), 3);
}

TEST_F(StoreTest, BinaryKeysAndValues) {
  std::string value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<char>(i));
  value += std::string("\0\0end", 5);
  std::string key("k\0ey", 4);
  auto c = client();
  c->set(key, value);
  EXPECT_EQ(client()->get(key, 1s), value);
  EXPECT_THROW(c->get("k", 50ms), CommError);  // the NUL is part of the key
}

TEST_F(StoreTest, OneMebibyteValue) {
  std::string value(1 << 20, '\0');
  std::mt19937 rng(7);
  for (char& ch : value) ch = static_cast<char>(rng());
  client()->set("big", value);
  EXPECT_EQ(client()->get("big", 2s), value);
}

TEST_F(StoreTest, OversizeFrameIsRefused) {
  // The client refuses to send one...
  auto c = client();
  try {
    c->set("huge", std::string(proto::kMaxFrameBytes, 'x'));
    FAIL() << "sent an oversize frame";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr("frame limit"));
  }
  c->set("after", "ok");
  EXPECT_EQ(c->get("after", 1s), "ok");
  // ...and the server closes a connection that announces one.
  RawConnection raw(server_->port());
  raw.send(proto::encode(proto::hello(kToken)));
  EXPECT_EQ(raw.read_one().op, proto::Op::kOk);
  raw.send(std::string("\x01\x00\x00\x04", 4));  // 64 MiB + 1
  bool closed = false;
  std::vector<proto::Message> replies = raw.read_until_closed(&closed);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].op, proto::Op::kError);
  EXPECT_THAT(replies[0].strings[0], HasSubstr("exceeds the limit"));
  EXPECT_TRUE(closed);
  // Before the handshake the limit is far smaller.
  RawConnection early(server_->port());
  early.send(std::string("\x00\x00\x10\x00", 4));  // 1 MiB HELLO
  replies = early.read_until_closed(&closed);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].op, proto::Op::kRefused);
  EXPECT_TRUE(closed);
}

// A peer that connects and never authenticates (sends nothing, or only a HELLO header) is
// closed after the server's hello timeout and counted; a client arriving meanwhile is served.
TEST(StoreServerTest, AConnectionWithoutHelloIsClosedAfterTheTimeout) {
  StoreServer server("127.0.0.1", 0, kToken, 300ms);
  RawConnection silent(server.port());
  RawConnection header_only(server.port());
  header_only.send(std::string("\x00\x01\x00\x00", 4));  // 256 bytes of HELLO that never come
  StoreClient c("127.0.0.1", server.port(), kToken, 2s);
  c.set("k", "v");
  const auto start = Clock::now();
  bool closed = false;
  EXPECT_TRUE(silent.read_until_closed(&closed).empty());
  EXPECT_TRUE(closed);
  EXPECT_TRUE(header_only.read_until_closed(&closed).empty());
  EXPECT_TRUE(closed);
  EXPECT_LT(ms_since(start), 1500);
  EXPECT_EQ(server.refused_clients(), 2);
  EXPECT_EQ(c.get("k", 1s), "v");  // authenticated connections are not timed out
}

// Requests sent back to back, before any reply is read, are each answered, in order: the server
// reads the next request once the reply to the last is written (so that a client that never reads
// cannot pile replies up in it), and that must not stall a pipelining client.
TEST_F(StoreTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection raw(server_->port());
  std::string burst = proto::encode(proto::hello(kToken));
  for (int i = 0; i < 3; ++i)
    burst += proto::encode(proto::set("k" + std::to_string(i), std::string(100000, char('a' + i))));
  for (int i = 0; i < 3; ++i) burst += proto::encode(proto::get("k" + std::to_string(i)));
  raw.send(burst);
  EXPECT_EQ(raw.read_one().op, proto::Op::kOk);  // HELLO
  for (int i = 0; i < 3; ++i) EXPECT_EQ(raw.read_one().op, proto::Op::kOk);
  for (int i = 0; i < 3; ++i) {
    const proto::Message value = raw.read_one();
    ASSERT_EQ(value.op, proto::Op::kValue);
    EXPECT_EQ(value.strings[0], std::string(100000, char('a' + i)));
  }
}

TEST_F(StoreTest, ServerDestroyedWhileAClientWaits) {
  auto c = client();
  std::string message;
  Clock::time_point start = Clock::now();
  std::thread waiter([&] {
    try {
      c->get("never", 5s);
    } catch (const CommError& e) {
      message = e.what();
    }
  });
  std::this_thread::sleep_for(100ms);
  server_.reset();
  waiter.join();
  EXPECT_THAT(message, HasSubstr("closed the connection during get('never')"));
  EXPECT_LT(ms_since(start), 2000.0);
}

TEST_F(StoreTest, ClientWaitsForAServerThatStartsLater) {
  int port = server_->port();
  server_.reset();
  std::string got;
  std::thread early([&] {
    StoreClient c("127.0.0.1", port, kToken, 3s);
    got = c.get("ready", 3s);
  });
  std::this_thread::sleep_for(150ms);
  server_ = std::make_unique<StoreServer>("127.0.0.1", port, kToken);
  client()->set("ready", "yes");
  early.join();
  EXPECT_EQ(got, "yes");
}

TEST_F(StoreTest, NoServerIsACommErrorNamingTheAddress) {
  int port = server_->port();
  server_.reset();
  Clock::time_point start = Clock::now();
  try {
    StoreClient c("127.0.0.1", port, kToken, 200ms);
    FAIL() << "connected to nothing";
  } catch (const AuthError&) {
    FAIL() << "not an auth problem";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("store at 127.0.0.1:{} did not answer", port)));
  }
  EXPECT_LT(ms_since(start), 1500.0);
}

TEST_F(StoreTest, HostNamesResolve) {
  // "localhost" may resolve to ::1 first while the server listens on 127.0.0.1 only: the client
  // tries every address.
  StoreClient c("localhost", server_->port(), kToken, 1s);
  c.set("named", "1");
  StoreServer named("localhost", 0, kToken);
  EXPECT_EQ(named.host(), "localhost");
  StoreClient d("localhost", named.port(), kToken, 1s);
  d.set("k", "v");
  EXPECT_EQ(d.get("k", 1s), "v");
}

TEST_F(StoreTest, BindingAnAddressInUseNamesIt) {
  try {
    StoreServer second("127.0.0.1", server_->port(), kToken);
    FAIL() << "bound twice";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("127.0.0.1:{}", server_->port())));
  }
}

}  // namespace
}  // namespace h2::comm
