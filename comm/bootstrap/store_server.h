// The rendezvous store's server: one per job (usually on rank 0), holding the key-value map in
// memory and answering StoreClients over TCP. Every connection must first present the job's token.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace h2::comm {

// Listens on host:port from construction to destruction and serves on a thread of its own
// (Boost.Asio, one session per connection). GET and WAIT of absent keys are parked until another
// client sets the keys; the server never times them out (clients do) and drops them when their
// connection closes. A client whose first frame is not HELLO with the right token is answered
// REFUSED, logged with its address and counted; one that sends no HELLO within `hello_timeout`
// is closed, logged and counted too. Frames above kMaxFrameBytes close the connection.
class StoreServer {
 public:
  // Ranks send HELLO as soon as they connect; a peer that never does (a scanner, a stuck or
  // hostile client) must not hold its socket and buffer for good.
  static constexpr std::chrono::milliseconds kHelloTimeout{10'000};

  // Binds and starts serving. `port` 0 picks a free port (see port()); `host` may be a name or an
  // address ("0.0.0.0" listens on every interface). CommError naming host:port when the address
  // cannot be bound (in use, not local, not resolvable).
  StoreServer(std::string host, int port, std::string token,
              std::chrono::milliseconds hello_timeout = kHelloTimeout);
  // Stops serving, closes every connection (waiting clients see the connection close) and joins
  // the thread.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  const std::string& host() const;
  // The bound port (the chosen one when constructed with 0).
  int port() const;
  // Connections refused so far: wrong or missing token, or a bad first frame.
  int64_t refused_clients() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h2::comm
