// Exchange: what an algorithm sees of one collective call. Tagged sends and receives to ranks of
// the group; every arriving message is checked against this rank's signature, sequence number and
// byte count, so a rank running a different collective is reported, not waited on; every wait is
// bounded by the collective's deadline and cut short by a peer's failure. Errors name this rank,
// the peer, the collective and the step. Unwinding with transfers in flight cancels them.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "comm/algorithms/give_up.h"
#include "comm/algorithms/tag.h"
#include "comm/transports/transport.h"

namespace h2::comm {

class Exchange {
 public:
  Exchange(Transport& transport, const Signature& signature, uint16_t sequence, Millis timeout,
           uint64_t spins_before_yield);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  const Signature& signature() const { return signature_; }

  // Non-blocking; `step` tells the messages of one algorithm apart (matched exactly).
  OpId send(int peer, int step, const void* data, size_t bytes);
  OpId recv(int peer, int step, void* data, size_t bytes);
  // Blocks until `op` finished; a receive must bring exactly the bytes it asked for.
  void wait(OpId op);
  void wait_all(std::vector<OpId>& ops);  // clears `ops`

 private:
  struct InFlight {
    int peer = -1;
    int step = 0;
    bool recv = false;
    size_t bytes = 0;
    bool active = false;
  };
  void check_arrival(const InFlight& what, const Completion& done) const;
  [[noreturn]] void fail(const std::string& message, int blamed = -1);
  std::string describe(const InFlight& what) const;

  Transport& transport_;
  Signature signature_;
  uint16_t packed_;
  uint16_t sequence_;
  Millis timeout_;
  std::chrono::steady_clock::time_point deadline_;
  uint64_t spins_before_yield_;
  BlameWatch blame_;  // a peer gave up waiting for this rank while the collective ran
  std::vector<InFlight> in_flight_;  // indexed by OpId
  int active_ = 0;
};

}  // namespace h2::comm
