// LoopbackTransport: the Transport of a group of one rank, in process memory. A job of one process
// (single-process training) still runs every collective and point-to-point call through the same
// HostCommunicator as a job of many, with no store, no sockets and no UCX: a send to itself is
// copied when posted and handed to the oldest receive whose tag matches, in order.
// Also the smallest example of a transport: a new one starts as a copy of this folder.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/transports/transport.h"

namespace h2::comm {

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport() = default;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "loopback"; }
  // Host memory only: device memory is staged by the host communicator.
  bool reaches(const Device& device) const override;
  OpId post_send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  OpId post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) override;
  std::optional<Completion> test(OpId op) override;
  bool progress() override { return false; }
  std::optional<PeerFailure> failure() override { return std::nullopt; }
  void notify_abort(const std::string&, int) override {}
  std::optional<AbortNotice> notice_from(int) const override { return std::nullopt; }
  uint64_t blame_count() const override { return 0; }
  int last_blamer() const override { return -1; }
  void cancel_all() override;

 private:
  struct Message {  // a send no receive has taken yet
    uint64_t tag = 0;
    std::vector<std::byte> bytes;
  };
  struct Receive {  // a receive no send has matched yet
    OpId op = 0;
    uint64_t tag = 0, mask = 0;
    void* data = nullptr;
    size_t capacity = 0;
  };
  void check_peer(int peer, const char* what) const;
  // Copies `message` into `receive`'s buffer and completes it.
  void deliver(const Receive& receive, const Message& message);

  OpId next_op_ = 1;
  std::deque<Message> unexpected_;        // sends in posting order
  std::deque<Receive> waiting_;           // receives in posting order
  std::map<OpId, Completion> completed_;  // finished, not yet tested
};

}  // namespace h2::comm
