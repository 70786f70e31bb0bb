// Bounded waits, arrival checks and error messages for one collective call.
#include "comm/algorithms/exchange.h"

#include <fmt/format.h>
#include <sched.h>

#include "comm/algorithms/give_up.h"
#include "comm/comm_error.h"

namespace h2::comm {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Exchange::Exchange(Transport& transport, const Signature& signature, uint16_t sequence,
                   Millis timeout, uint64_t spins_before_yield)
    : transport_(transport),
      signature_(signature),
      packed_(signature.pack()),
      sequence_(sequence),
      timeout_(timeout),
      deadline_(Clock::now() + timeout),
      spins_before_yield_(spins_before_yield),
      blame_(transport) {}

Exchange::~Exchange() {
  if (active_ > 0) transport_.cancel_all();
}

OpId Exchange::send(int peer, int step, const void* data, size_t bytes) {
  const OpId op =
      transport_.post_send(peer, collective_tag(rank(), packed_, sequence_, step), data, bytes);
  if (op >= OpId(in_flight_.size())) in_flight_.resize(op + 1);
  in_flight_[op] = InFlight{peer, step, false, bytes, true};
  ++active_;
  return op;
}

OpId Exchange::recv(int peer, int step, void* data, size_t bytes) {
  const OpId op =
      transport_.post_recv(peer, collective_tag(peer, 0, 0, step), kCollectiveMask, data, bytes);
  if (op >= OpId(in_flight_.size())) in_flight_.resize(op + 1);
  in_flight_[op] = InFlight{peer, step, true, bytes, true};
  ++active_;
  return op;
}

std::string Exchange::describe(const InFlight& what) const {
  return fmt::format("rank {} in {} (collective #{}, round {} of its algorithm, {} rank {})",
                     rank(), signature_.str(), sequence_, what.step,
                     what.recv ? "receiving from" : "sending to", what.peer);
}

void Exchange::fail(const std::string& message, int blamed) {
  give_up(transport_, message, blamed);
}

void Exchange::check_arrival(const InFlight& what, const Completion& done) const {
  if (!what.recv) return;
  const uint16_t peer_signature = tag_signature(done.sender_tag);
  const uint16_t peer_sequence = tag_sequence(done.sender_tag);
  if (peer_signature != packed_)
    throw CommError(fmt::format("mismatched collectives: rank {} called {} where rank {} called {}",
                                what.peer, signature_.difference(peer_signature), rank(),
                                signature_.str()));
  if (peer_sequence != sequence_)
    throw CommError(fmt::format(
        "mismatched collectives: rank {} sent its collective #{} while rank {} runs #{} ({}); a "
        "rank skipped or added a collective",
        what.peer, peer_sequence, rank(), sequence_, signature_.str()));
  if (done.bytes != what.bytes)
    throw CommError(fmt::format(
        "mismatched collectives: rank {} sent {} bytes where {} were expected in {} (the ranks "
        "disagree on the count)",
        what.peer, done.bytes, what.bytes, describe(what)));
}

void Exchange::wait(OpId op) {
  InFlight& what = in_flight_.at(op);
  for (uint64_t spins = 0;; ++spins) {
    std::optional<Completion> done;
    try {
      done = transport_.test(op);
    } catch (const CommError& e) {
      what.active = false;
      --active_;
      fail(fmt::format("{}: {}", describe(what), e.what()));
    }
    if (done) {
      what.active = false;
      --active_;
      try {
        check_arrival(what, *done);
      } catch (const CommError& e) {
        fail(e.what());
      }
      return;
    }
    if (auto failure = transport_.failure())
      fail(fmt::format("{} failed: {}", describe(what), explain_failure(transport_, *failure)));
    if ((spins & 255) == 0 && (blame_.blamed() || Clock::now() > deadline_))
      fail(fmt::format("{} {}: rank {} died, hangs or did not call {}", describe(what),
                       blame_.blamed() ? "gave up (" + blame_.explain() + ")"
                                       : fmt::format("timed out after {:.0f} s (H2_COMM_TIMEOUT)",
                                                     timeout_.count() / 1000.0),
                       what.peer, collective_name(signature_.kind)),
           what.peer);
    if (spins >= spins_before_yield_) sched_yield();
  }
}

void Exchange::wait_all(std::vector<OpId>& ops) {
  for (OpId op : ops) wait(op);
  ops.clear();
}

}  // namespace h2::comm
