// The rendezvous store's client: every rank (the server's own included) talks to the store
// through one. Blocking calls, each bounded by a timeout, so that a lost store is an error, not a
// hang.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/store.h"

namespace h2::comm {

// One TCP connection to a StoreServer. Operations without a timeout argument (set, add,
// compare_set) use the constructor's `timeout`. After any failure (timeout, closed connection,
// server error) the connection is dropped and the next call reconnects (retrying until its own
// timeout); the failed call is not retried, since the server may have applied it.
class StoreClient final : public Store {
 public:
  // Connects, retrying until `timeout` passes (the server may start later), and presents `token`.
  // AuthError when the server refuses the token; CommError naming host:port when no server
  // answered within `timeout`.
  StoreClient(std::string host, int port, std::string token, Millis timeout);
  ~StoreClient() override;
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // Store. CommError messages name the store's host:port, the operation and its key(s):
  // "store at HOST:PORT closed the connection during get('key')", or "... get('key') timed out
  // after 0.2 s". Values above the frame limit (store_protocol.h: 64 MiB) are a CommError.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;

  // "host:port", as used in messages.
  const std::string& address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h2::comm
