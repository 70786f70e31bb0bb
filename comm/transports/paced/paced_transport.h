// PacedTransport: the links of an emulated cluster. It wraps the transport that really moves the
// bytes (UCX over shared memory, far faster than the links it stands for) and makes every
// transfer between two ranks complete no earlier than their link class allows (core/cluster.h):
//
//   arrival = max(sent, link free) + bytes / bandwidth + latency
//
// where `sent` is when the sender posted it (carried in an 8-byte trailer: the ranks share the
// host's monotonic clock) and "link free" is when the previous transfer from that sender finished
// crossing the link, so that back-to-back transfers share its bandwidth. The receiver holds the
// completion until the arrival time. The sender's buffer is copied at once, but its send
// completes only when its last byte has left (max(sent, link free) + bytes / bandwidth, the same
// figures the receiver computes): a rank that waits for its send spends the link's time, as on a
// real link; one that does not wait computes meanwhile. Transfers to itself are free.
//
// Honest emulation: a transfer that had not arrived in reality when a poll after its arrival time
// looked for it overran the model (the host, not the link, set the pace); overruns are counted in
// PacingStats, shared by every transport of the process.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/transports/transport.h"
#include "core/cluster.h"
#include "core/device.h"

namespace h2::comm {

// The process's link pacing figures (every paced transport of every communicator adds to them).
class LinkPacing {
 public:
  void record(double modelled_s, double overrun_s);
  PacingStats stats() const;

 private:
  mutable std::mutex mutex_;
  PacingStats stats_;
};

class PacedTransport final : public Transport {
 public:
  // `link(peer)`: the link between this rank and rank `peer` of the transport's group.
  PacedTransport(std::unique_ptr<Transport> inner, std::function<LinkSpec(int peer)> link,
                 std::shared_ptr<LinkPacing> pacing);
  ~PacedTransport() override;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return "paced(" + inner_->name() + ")"; }
  bool reaches(const Device& device) const override;
  OpId post_send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  OpId post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) override;
  std::optional<Completion> test(OpId op) override;
  bool progress() override { return inner_->progress(); }
  std::optional<PeerFailure> failure() override { return inner_->failure(); }
  void notify_abort(const std::string& reason, int blamed) override {
    inner_->notify_abort(reason, blamed);
  }
  std::optional<AbortNotice> notice_from(int rank) const override {
    return inner_->notice_from(rank);
  }
  uint64_t blame_count() const override { return inner_->blame_count(); }
  int last_blamer() const override { return inner_->last_blamer(); }
  void cancel_all() override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    OpId inner = 0;  // the wrapped transport's id (it reuses ids once they complete)
    bool recv = false;
    int peer = 0;
    std::vector<std::byte> buffer;      // payload + trailer
    void* user = nullptr;               // receive: where the payload goes
    size_t capacity = 0;                // receive: the caller's buffer size
    std::optional<Completion> arrived;  // inner completion (trailer included)
    Clock::time_point due{};            // receive: the modelled arrival; send: last byte out
    Clock::time_point last_miss{};      // the last poll that found it not yet arrived
  };

  std::unique_ptr<Transport> inner_;
  std::function<LinkSpec(int peer)> link_;
  std::shared_ptr<LinkPacing> pacing_;
  OpId next_id_ = 1;
  std::map<OpId, Pending> pending_;
  std::map<int, Clock::time_point> link_free_;  // by sender: when its last transfer finished
  std::map<int, Clock::time_point> send_free_;  // by receiver: when this rank's last send did
};

}  // namespace h2::comm
